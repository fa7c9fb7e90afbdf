"""The floor of one hop: CPU of a bare grpc.aio unary call over loopback, client and server each in its own
process, with answers the size of a leg's (0, 10 or 100 hits with their texts). The query path's per-stage
CPU budget (docs/performance.md) subtracts this from each service's CPU per answer: what is left is ours.

    hybridsearch hop-cost --calls 2000 --hits 0,10,100
"""

from __future__ import annotations

import asyncio
import multiprocessing
import socket
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from typing import TypeVar

import grpc
import psutil

from hybridsearch.v1 import bm25_pb2_grpc, common_pb2

WARMUP = 200
T = TypeVar("T")
TEXT = "words of a stored chunk that a leg returns for previews " * 4  # ~230 characters, a trimmed text


def leg_answer(hits: int) -> common_pb2.LegSearchResponse:
    return common_pb2.LegSearchResponse(engine="hop", lists=[common_pb2.RankedList(
        leg=common_pb2.LEG_BM25, kind=common_pb2.QUERY_KIND_ORIGINAL, query="q", hits=[
            common_pb2.LegHit(doc_id=f"doc-{i}", chunk_id=f"doc-{i}#0", title=f"title {i}", text=TEXT,
                              score=10.0 - i / 100, rank=i + 1) for i in range(hits)])])


class _Answers(bm25_pb2_grpc.Bm25ServiceServicer):
    def __init__(self, hits: int) -> None:
        self.answer = leg_answer(hits)

    async def Search(self, request, context):
        return self.answer


def _serve(port: int, hits: int, ready) -> None:
    async def main() -> None:
        server = grpc.aio.server()
        bm25_pb2_grpc.add_Bm25ServiceServicer_to_server(_Answers(hits), server)
        server.add_insecure_port(f"127.0.0.1:{port}")
        await server.start()
        ready.set()
        await server.wait_for_termination()
    asyncio.run(main())


@dataclass
class HopCost:
    hits: int
    answer_bytes: int
    calls: int
    client_cpu_ms: float  # per call: serialise, send, wait, parse on the calling side
    server_cpu_ms: float  # per call: parse, dispatch, serialise, send on the serving side
    wall_ms: float  # per call, one at a time

    @property
    def cpu_ms(self) -> float:
        return round(self.client_cpu_ms + self.server_cpu_ms, 3)


async def _call(port: int, calls: int) -> tuple[float, float]:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = bm25_pb2_grpc.Bm25ServiceStub(channel)
        request = common_pb2.LegSearchRequest(collection="hop", limit=100, queries=[
            common_pb2.LegQuery(text="a query of a few words", kind=common_pb2.QUERY_KIND_ORIGINAL)])
        for _ in range(WARMUP):
            await stub.Search(request)
        cpu, wall = time.process_time(), time.perf_counter()
        for _ in range(calls):
            await stub.Search(request)
        return time.process_time() - cpu, time.perf_counter() - wall


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def against_server(serve: Callable, serve_args: tuple, client: Callable[[int], Awaitable[T]]) -> tuple[T, float]:
    """`serve(port, *serve_args, ready)` in a fresh process (spawned: no gRPC state forked from this one), then
    `client(port)` run here; (what the client returned, the server process's CPU seconds meanwhile)."""
    spawn = multiprocessing.get_context("spawn")
    port, ready = _free_port(), spawn.Event()
    server = spawn.Process(target=serve, args=(port, *serve_args, ready), daemon=True)
    server.start()
    try:
        if not ready.wait(30):
            raise RuntimeError(f"the server ({serve.__name__}) did not start")
        serving = psutil.Process(server.pid)
        before = serving.cpu_times()
        result = asyncio.run(client(port))
        after = serving.cpu_times()
    finally:
        server.terminate()
        server.join(10)
    return result, (after.user + after.system) - (before.user + before.system)


def measure(hits: int, calls: int) -> HopCost:
    """One server process answering `hits` hits, `calls` sequential calls from this process."""
    (client_cpu, wall), server_cpu = against_server(_serve, (hits,), lambda port: _call(port, calls))
    total = calls + WARMUP  # the server's clock ran over the warm-up too
    return HopCost(hits, leg_answer(hits).ByteSize(), calls, round(client_cpu / calls * 1e3, 3),
                   round(server_cpu / total * 1e3, 3), round(wall / calls * 1e3, 3))


def as_dict(cost: HopCost) -> dict:
    return asdict(cost) | {"cpu_ms": cost.cpu_ms}
