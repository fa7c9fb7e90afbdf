"""The fusion service over loopback gRPC, for the tests of its RPC."""

from __future__ import annotations

import grpc
import pytest

from hybridsearch.fusion.service import FusionServicer
from hybridsearch.runtime.server import create_server
from hybridsearch.v1 import fusion_pb2_grpc


@pytest.fixture
async def fusion():
    srv = create_server("test")
    fusion_pb2_grpc.add_FusionServiceServicer_to_server(FusionServicer(), srv)
    port = srv.add_insecure_port("127.0.0.1:0")
    await srv.start()
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        yield fusion_pb2_grpc.FusionServiceStub(channel)
    await srv.stop(None)
