"""GatewayClient retries what is safe to retry: a gateway briefly UNAVAILABLE is tried again, a
caller's mistake is not (a real gRPC server on loopback answers by script)."""

from __future__ import annotations

from concurrent import futures

import grpc
import pytest

from hybridsearch.client import GatewayClient
from hybridsearch.v1 import search_pb2, search_pb2_grpc


class Scripted(search_pb2_grpc.SearchServiceServicer):
    def __init__(self, codes: list[grpc.StatusCode]) -> None:
        self.codes, self.calls = codes, 0

    def Search(self, request, context):
        self.calls += 1
        if self.codes:
            context.abort(self.codes.pop(0), "scripted")
        return search_pb2.SearchResponse(took_ms=1.0)


@pytest.fixture
def scripted():
    server = grpc.server(futures.ThreadPoolExecutor(2))
    servicer = Scripted([])
    search_pb2_grpc.add_SearchServiceServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    client = GatewayClient(f"127.0.0.1:{port}")
    yield servicer, client
    client.close()
    server.stop(0)


def test_unavailable_is_retried(scripted):
    servicer, client = scripted
    servicer.codes = [grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.UNAVAILABLE]
    assert client.search(search_pb2.SearchRequest(query="q"), timeout=10).took_ms == 1.0
    assert servicer.calls == 3


def test_invalid_argument_is_not(scripted):
    servicer, client = scripted
    servicer.codes = [grpc.StatusCode.INVALID_ARGUMENT]
    with pytest.raises(grpc.RpcError) as err:
        client.search(search_pb2.SearchRequest(query="q"), timeout=10)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and servicer.calls == 1
