"""Both clients retry what is safe to retry (a gateway briefly UNAVAILABLE is tried again) and raise a
caller's mistake at once as a typed error carrying the code and message (a real gRPC server on loopback
answers by script)."""

from __future__ import annotations

import asyncio
from concurrent import futures

import grpc
import pytest

from hybridsearch.client import AsyncGatewayClient, GatewayClient, InvalidArgument, ResourceExhausted, Unavailable
from hybridsearch.v1 import search_pb2, search_pb2_grpc


class Scripted(search_pb2_grpc.SearchServiceServicer):
    def __init__(self, codes: list[grpc.StatusCode]) -> None:
        self.codes, self.calls = codes, 0

    def Search(self, request, context):
        self.calls += 1
        if self.codes:
            context.abort(self.codes.pop(0), f"scripted for {request.query}")
        return search_pb2.SearchResponse(took_ms=1.0)


@pytest.fixture
def scripted():
    server = grpc.server(futures.ThreadPoolExecutor(2))
    servicer = Scripted([])
    search_pb2_grpc.add_SearchServiceServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield servicer, f"127.0.0.1:{port}"
    server.stop(0)


def sync_search(address: str, query: str):
    with GatewayClient(address) as client:
        return client.search(query, timeout=10)


def async_search(address: str, query: str):
    async def run():
        async with AsyncGatewayClient(address) as client:
            return await client.search(query, timeout=10)
    return asyncio.run(run())


CLIENTS = {"sync": sync_search, "asyncio": async_search}


@pytest.mark.parametrize("kind", CLIENTS)
def test_unavailable_is_retried(scripted, kind):
    servicer, address = scripted
    servicer.codes = [grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.UNAVAILABLE]
    assert CLIENTS[kind](address, "q").took_ms == 1.0
    assert servicer.calls == 3


@pytest.mark.parametrize("kind", CLIENTS)
@pytest.mark.parametrize("code, error", [(grpc.StatusCode.INVALID_ARGUMENT, InvalidArgument),
                                         (grpc.StatusCode.RESOURCE_EXHAUSTED, ResourceExhausted)])
def test_other_codes_are_not_retried_and_raise_typed(scripted, kind, code, error):
    servicer, address = scripted
    servicer.codes = [code]
    with pytest.raises(error) as err:
        CLIENTS[kind](address, "q")
    assert servicer.calls == 1
    assert err.value.code() == code and err.value.details() == "scripted for q"
    assert isinstance(err.value, grpc.RpcError)  # code written against plain gRPC still catches it


@pytest.mark.parametrize("kind", CLIENTS)
def test_retries_run_out_as_unavailable(scripted, kind):
    servicer, address = scripted
    servicer.codes = [grpc.StatusCode.UNAVAILABLE] * 5
    with pytest.raises(Unavailable):
        CLIENTS[kind](address, "q")
    assert servicer.calls == 3  # the retry policy's maxAttempts
