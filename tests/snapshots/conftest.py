"""A real S3-API server for the snapshot tests: moto's server mode as a process of its own, on loopback."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def moto_server(port: int):
    """moto_server on 127.0.0.1:`port` until the block ends; its URL."""
    binary = Path(sys.executable).with_name("moto_server")
    command = [str(binary)] if binary.exists() else [shutil.which("moto_server") or "moto_server"]
    process = subprocess.Popen([*command, "-H", "127.0.0.1", "-p", str(port)], stdout=subprocess.DEVNULL,
                               stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                break
        if process.poll() is not None:
            pytest.fail(f"moto_server exited {process.returncode}")
        time.sleep(0.1)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(10)


@pytest.fixture(scope="session")
def s3_endpoint():
    """The stack's snapshots.s3_endpoint_url (tests/stacks.py), served; its bucket `snapshots` made."""
    import boto3

    from stacks import STACK_ENV, shifted

    url = shifted(STACK_ENV)["HYBRIDSEARCH_SNAPSHOTS__S3_ENDPOINT_URL"]
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
    with moto_server(int(url.rsplit(":", 1)[1])) as endpoint:
        boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1").create_bucket(Bucket="snapshots")
        yield endpoint
