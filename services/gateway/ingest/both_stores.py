"""One write (or delete, or drop) on both stores as one outcome: acknowledged only when both stores confirmed it;
otherwise a refusal that says whether a retry can succeed."""

from __future__ import annotations

import asyncio

import grpc

from hybridsearch.contract.errors import InvalidArgument, Refusal
from hybridsearch.runtime.services import STORES
from hybridsearch.v1 import common_pb2

WRITE_TIMEOUT_S = 600.0


def store_failure(results: list, what: str = "write") -> Refusal | None:
    """The stores' answers to one write (or delete) as one refusal, or None when both acknowledged it.

    A store that refused the batch (INVALID_ARGUMENT, RESOURCE_EXHAUSTED) makes it INVALID_ARGUMENT:
    the same batch would be refused again. Anything else is UNAVAILABLE, and a retry is safe."""
    failures = [(store, r) for store, r in zip(STORES, results) if isinstance(r, BaseException)]
    if not failures:
        return None
    reasons = "; ".join(f"{store}: {r.details() if isinstance(r, grpc.aio.AioRpcError) else r}" for store, r in failures)
    refused = {grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.RESOURCE_EXHAUSTED}
    if any(isinstance(r, grpc.aio.AioRpcError) and r.code() in refused for _, r in failures):
        return InvalidArgument(f"{what} refused by a store, do not retry it unchanged: {reasons}")
    return Refusal(f"{what} not acknowledged, retry is safe: {reasons}", grpc.StatusCode.UNAVAILABLE)


async def write_both(backends, bm25_request: common_pb2.UpsertChunksRequest,
                     vector_request: common_pb2.UpsertChunksRequest) -> tuple:
    """The batch written to both stores at once; the Refusal of store_failure unless both acknowledged it."""
    results = await asyncio.gather(
        backends.bm25.UpsertChunks(bm25_request, timeout=WRITE_TIMEOUT_S),
        backends.vector.UpsertChunks(vector_request, timeout=WRITE_TIMEOUT_S),
        return_exceptions=True,
    )
    if (failure := store_failure(results)) is not None:
        raise failure
    return tuple(results)
