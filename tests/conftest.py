"""Shared fixtures. `stack` runs the real thing: redis-server, Triton and every service as its own
process on loopback ports of its own, with a fresh data directory."""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED_DATASETS = REPO.parent / "shared" / "datasets"
STACK_ENV = {
    "HYBRIDSEARCH_ENDPOINTS__GATEWAY_PORT": "51051",
    "HYBRIDSEARCH_ENDPOINTS__BM25_PORT": "51052",
    "HYBRIDSEARCH_ENDPOINTS__VECTOR_PORT": "51053",
    "HYBRIDSEARCH_ENDPOINTS__EXPANSION_PORT": "51054",
    "HYBRIDSEARCH_ENDPOINTS__FUSION_PORT": "51055",
    "HYBRIDSEARCH_EXPANSION__REDIS_URL": "redis://127.0.0.1:56379/0",
    "HYBRIDSEARCH_RERANK__TRITON_URL": "127.0.0.1:58001",
    "HYBRIDSEARCH_RERANK__TRITON_HTTP_PORT": "58000",
    "HYBRIDSEARCH_RERANK__TRITON_METRICS_PORT": "58002",
    # No LLM in the shared stack (tests/expansion/test_llm_server.py starts one on a port of its own).
    "HYBRIDSEARCH_EXPANSION__LLM_SERVE": "",
    # Metrics endpoints are tested in tests/observability on ports of their own; off here, so test
    # stacks never take 9464.. from a `make run` on the same machine.
    "HYBRIDSEARCH_METRICS_PORT": "0",
}


@contextmanager
def running_stack(env: dict[str, str]):
    """The whole stack as child processes, configured by `env` on top of this process's environment."""
    from hybridsearch.common.config import get_settings
    from hybridsearch.launcher import Stack

    saved = dict(os.environ)
    os.environ.update(env)
    os.environ.setdefault("HYBRIDSEARCH_MODELS_DIR", str(REPO / "var" / "models"))
    get_settings.cache_clear()
    running = Stack(get_settings()).start()
    try:
        yield running
    finally:
        running.stop()
        os.environ.clear()
        os.environ.update(saved)
        get_settings.cache_clear()


@pytest.fixture(scope="session")
def stack(tmp_path_factory):
    with running_stack({**STACK_ENV, "HYBRIDSEARCH_DATA_DIR": str(tmp_path_factory.mktemp("stack"))}) as running:
        yield running


@pytest.fixture(scope="session")
def gateway(stack):
    from hybridsearch.client import GatewayClient

    client = GatewayClient(stack.settings.endpoints.addr("gateway"))
    yield client
    client.close()
