"""The gRPC side: a few grpc.aio channels used round-robin, and Search / Upsert calls turned into Outcomes.

Each channel gets a subchannel pool of its own, so the channels are separate HTTP/2 connections
(by default gRPC would share one connection between channels with the same target and arguments).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator

import grpc

from hybridsearch.security.access import aio_gateway_channel
from hybridsearch.runtime.server import CHANNEL_OPTIONS
from hybridsearch.tools.perf.load.bounds import check_loopback
from hybridsearch.tools.perf.load.recorder import TOOK_STAGE, Outcome
from hybridsearch.v1 import ingest_pb2, ingest_pb2_grpc, search_pb2, search_pb2_grpc

CHANNEL_ARGS = [*CHANNEL_OPTIONS, ("grpc.use_local_subchannel_pool", 1)]


class ChannelPool:
    """`size` channels to one loopback address, handed out round-robin."""

    def __init__(self, address: str, size: int = 4) -> None:
        self.address = check_loopback(address)
        # TLS and the API key as configured (security/access.py).
        self.channels = [aio_gateway_channel(address, CHANNEL_ARGS) for _ in range(max(1, size))]
        self._search = itertools.cycle([search_pb2_grpc.SearchServiceStub(c) for c in self.channels])
        self._ingest = itertools.cycle([ingest_pb2_grpc.IngestServiceStub(c) for c in self.channels])

    def search(self) -> search_pb2_grpc.SearchServiceStub:
        return next(self._search)

    def ingest(self) -> ingest_pb2_grpc.IngestServiceStub:
        return next(self._ingest)

    async def close(self) -> None:
        for channel in self.channels:
            await channel.close()


def outcome_of(response: search_pb2.SearchResponse) -> Outcome:
    """What an OK answer says about itself: degraded, failed legs, stage times (explain) and took_ms."""
    stages = tuple((t.stage, t.ms) for t in response.explain.timings) + ((TOOK_STAGE, response.took_ms),)
    failed = tuple(leg.name for leg in response.legs if leg.state == search_pb2.LEG_STATE_FAILED)
    return Outcome(degraded=response.degraded, failed_legs=failed, stages_ms=stages)


class SearchCall:
    """One Search per call, the next request of `requests` each time, under `timeout_s`."""

    def __init__(self, pool: ChannelPool, requests: Iterable[search_pb2.SearchRequest], timeout_s: float) -> None:
        self.pool = pool
        self.requests: Iterator[search_pb2.SearchRequest] = itertools.cycle(requests)
        self.timeout_s = timeout_s

    async def __call__(self) -> Outcome:
        try:
            response = await self.pool.search().Search(next(self.requests), timeout=self.timeout_s)
        except grpc.aio.AioRpcError as err:
            return Outcome(code=err.code().name)
        return outcome_of(response)


class UpsertCall:
    """One Upsert of the next batch per call. Every id sent goes to `sent_ids`, acknowledged or not (a
    timed-out upsert may still have been written), so the writer can delete them all afterwards."""

    def __init__(self, pool: ChannelPool, collection: str, batches: Iterator[list[ingest_pb2.Document]],
                 timeout_s: float) -> None:
        self.pool = pool
        self.collection = collection
        self.batches = batches
        self.timeout_s = timeout_s
        self.sent_ids: list[str] = []

    async def __call__(self) -> Outcome:
        batch = next(self.batches)
        request = ingest_pb2.UpsertRequest(collection=self.collection, documents=batch)
        self.sent_ids.extend(d.id for d in batch)
        try:
            await self.pool.ingest().Upsert(request, timeout=self.timeout_s)
        except grpc.aio.AioRpcError as err:
            return Outcome(code=err.code().name)
        return Outcome()
