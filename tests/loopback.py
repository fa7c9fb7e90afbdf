"""A store service over gRPC on a loopback port of its own, for tests that call it as the gateway does: the
servicer around a real engine, its stub, and the engine closed afterwards.

A module of its own (as stacks.py), not conftest.py: the bm25 and vector test folders both use it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import grpc
import pytest


@asynccontextmanager
async def store_stub(store: str, engine) -> AsyncIterator:
    """The stub of `store` ("bm25" or "vector") serving `engine` on a free loopback port; the engine closed
    with the server."""
    if store == "bm25":
        from hybridsearch.bm25.service import Bm25Servicer as Servicer
        from hybridsearch.v1.bm25_pb2_grpc import Bm25ServiceStub as Stub
        from hybridsearch.v1.bm25_pb2_grpc import add_Bm25ServiceServicer_to_server as add
    else:
        from hybridsearch.v1.vector_pb2_grpc import VectorServiceStub as Stub
        from hybridsearch.v1.vector_pb2_grpc import add_VectorServiceServicer_to_server as add
        from hybridsearch.vector.service import VectorServicer as Servicer
    server = grpc.aio.server()
    add(Servicer(engine), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            yield Stub(channel)
    finally:
        await server.stop(None)
        await engine.close()


async def refused(call) -> grpc.aio.AioRpcError:
    """The error a call ends with (it must end with one)."""
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await call
    return err.value
