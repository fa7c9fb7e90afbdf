"""One stack for the fault suite (`make test-faults`), on ports of its own, with the LLM served and a
fault proxy in front of the BM25 service (the gateway and expansion dial BM25 through it)."""

from __future__ import annotations

import pytest
from stacks import gateway_client, running_stack, stack_env_on

from hybridsearch.cli import SAMPLE_CORPUS
from hybridsearch.corpus import read_folder
from hybridsearch.tools.faults.proxy import FaultProxy

BM25_PORT = 27052
PROXY_PORT = 27060
FAULT_ENV = {
    **stack_env_on(grpc="2705", redis="2677", triton="2840"),
    "HYBRIDSEARCH_ENDPOINTS__BM25_ADDR": f"127.0.0.1:{PROXY_PORT}",
    "HYBRIDSEARCH_EXPANSION__LLM_SERVE": "smollm2-135m",
    "HYBRIDSEARCH_EXPANSION__LLM_PORT": "27080",
}


@pytest.fixture(scope="session")
def bm25_proxy():
    with FaultProxy(f"127.0.0.1:{BM25_PORT}", listen_port=PROXY_PORT) as proxy:
        yield proxy


@pytest.fixture(scope="session")
def fault_stack(tmp_path_factory, bm25_proxy):
    env = {**FAULT_ENV, "HYBRIDSEARCH_DATA_DIR": str(tmp_path_factory.mktemp("fault-stack"))}
    with running_stack(env) as stack, gateway_client(stack) as client:
        client.index("default", list(read_folder(SAMPLE_CORPUS)))
        yield stack
