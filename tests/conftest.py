"""Shared fixtures. `stack` runs the real thing: redis-server, Triton and every service as its own
process on loopback ports of its own, with a fresh data directory (tests/stacks.py)."""

from __future__ import annotations

import pytest
from stacks import STACK_ENV, gateway_client, running_stack


@pytest.fixture(scope="session")
def stack(tmp_path_factory):
    with running_stack({**STACK_ENV, "HYBRIDSEARCH_DATA_DIR": str(tmp_path_factory.mktemp("stack"))}) as running:
        yield running


@pytest.fixture(scope="session")
def gateway(stack):
    with gateway_client(stack) as client:
        yield client
