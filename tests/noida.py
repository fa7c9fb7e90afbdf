"""noida-db, a real process answering the Elasticsearch 8 REST API (PyPI), on a loopback port: the OpenSearch
adapter's tests run against it (OpenSearch itself does not run here).

A module of its own (as loopback.py), not conftest.py: tests/bm25's modules share it."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx


def noida_binary() -> Path:
    import noida_db

    # The package's console script wraps the binary in a child process; run the binary itself so that
    # stopping it (SIGSTOP in a test, SIGTERM at the end) reaches the server.
    return Path(noida_db.__file__).parent / "noida-db"


@contextmanager
def noida_server(port: int, data: Path) -> Iterator[subprocess.Popen]:
    """noida-db on 127.0.0.1:`port` with its data in `data` until the block ends; its process."""
    url = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [str(noida_binary()), "start", "--only", "elasticsearch", "--host", "127.0.0.1",
         "--elasticsearch-port", str(port), "--data-dir", str(data)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
    )
    deadline = time.monotonic() + 30
    while True:
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                break
        except httpx.TransportError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError(f"noida-db did not start on {url}: {proc.stdout.read().decode()[-2000:]}")
        time.sleep(0.1)
    try:
        yield proc
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
