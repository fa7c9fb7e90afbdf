"""Every call of a gateway channel carries the API key: unary and client-streaming, blocking and asyncio
(a real gRPC server on loopback records the metadata it received)."""

from __future__ import annotations

import asyncio
from concurrent import futures

import grpc
import pytest

from hybridsearch.security.access import aio_gateway_channel, gateway_channel
from hybridsearch.v1 import ingest_pb2, ingest_pb2_grpc


class Recording(ingest_pb2_grpc.IngestServiceServicer):
    def __init__(self) -> None:
        self.seen: dict[str, str | None] = {}

    def Upsert(self, request, context):
        self.seen["unary"] = dict(context.invocation_metadata()).get("authorization")
        return ingest_pb2.UpsertResponse()

    def UpsertStream(self, requests, context):
        list(requests)
        self.seen["stream"] = dict(context.invocation_metadata()).get("authorization")
        return ingest_pb2.UpsertResponse()


@pytest.fixture
def server():
    srv = grpc.server(futures.ThreadPoolExecutor(2))
    recording = Recording()
    ingest_pb2_grpc.add_IngestServiceServicer_to_server(recording, srv)
    port = srv.add_insecure_port("127.0.0.1:0")
    srv.start()
    yield recording, f"127.0.0.1:{port}"
    srv.stop(0)


def test_blocking_channel_sends_the_key_on_every_kind_of_call(server):
    recording, address = server
    channel = gateway_channel(address, key="k-123")
    stub = ingest_pb2_grpc.IngestServiceStub(channel)
    stub.Upsert(ingest_pb2.UpsertRequest(), timeout=10)
    stub.UpsertStream(iter([ingest_pb2.UpsertRequest()]), timeout=10)
    channel.close()
    assert recording.seen == {"unary": "Bearer k-123", "stream": "Bearer k-123"}


def test_asyncio_channel_sends_the_key_on_every_kind_of_call(server):
    recording, address = server

    async def run():
        channel = aio_gateway_channel(address, key="k-123")
        stub = ingest_pb2_grpc.IngestServiceStub(channel)
        await stub.Upsert(ingest_pb2.UpsertRequest(), timeout=10)

        async def batches():
            yield ingest_pb2.UpsertRequest()
        await stub.UpsertStream(batches(), timeout=10)
        await channel.close()

    asyncio.run(run())
    assert recording.seen == {"unary": "Bearer k-123", "stream": "Bearer k-123"}
