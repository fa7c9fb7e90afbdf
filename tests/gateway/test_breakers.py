"""The gateway's circuit breakers: what opens them, what they skip, when they close again."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from hybridsearch.gateway.breakers import Breakers, CircuitOpen, counts_as_failure


def rpc_error(code: grpc.StatusCode) -> grpc.aio.AioRpcError:
    return grpc.aio.AioRpcError(code, grpc.aio.Metadata(), grpc.aio.Metadata(), details=code.name)


async def call(breakers: Breakers, part: str, error: BaseException | None, calls: list[str]) -> None:
    async with breakers.guard(part):
        calls.append(part)
        if error is not None:
            raise error


@pytest.mark.parametrize("error,counts", [
    (rpc_error(grpc.StatusCode.UNAVAILABLE), True),
    (rpc_error(grpc.StatusCode.DEADLINE_EXCEEDED), True),
    (rpc_error(grpc.StatusCode.INTERNAL), True),
    (rpc_error(grpc.StatusCode.INVALID_ARGUMENT), False),
    (rpc_error(grpc.StatusCode.NOT_FOUND), False),
    (asyncio.TimeoutError(), True),
    (RuntimeError("triton client error"), True),
    (asyncio.CancelledError(), False),
])
def test_what_counts_as_a_failure(error, counts):
    assert counts_as_failure(error) is counts


def test_opens_after_threshold_then_skips_without_calling():
    async def run():
        breakers, calls = Breakers(threshold=3, reset_s=60), []
        for _ in range(3):
            with pytest.raises(grpc.aio.AioRpcError):
                await call(breakers, "bm25", rpc_error(grpc.StatusCode.UNAVAILABLE), calls)
        assert await breakers.state("bm25") == "opened"
        with pytest.raises(CircuitOpen, match="circuit open: bm25"):
            await call(breakers, "bm25", None, calls)
        assert calls == ["bm25"] * 3  # the fourth was not made
        # Other parts have breakers of their own.
        await call(breakers, "vector", None, calls)
        assert calls[-1] == "vector"

    asyncio.run(run())


def test_a_callers_mistake_never_opens_it():
    async def run():
        breakers, calls = Breakers(threshold=2, reset_s=60), []
        for _ in range(5):
            with pytest.raises(grpc.aio.AioRpcError):
                await call(breakers, "vector", rpc_error(grpc.StatusCode.INVALID_ARGUMENT), calls)
        assert await breakers.state("vector") == "closed"
        assert len(calls) == 5

    asyncio.run(run())


def test_a_success_resets_the_count():
    async def run():
        breakers, calls = Breakers(threshold=2, reset_s=60), []
        for _ in range(3):
            with pytest.raises(asyncio.TimeoutError):
                await call(breakers, "fusion", asyncio.TimeoutError(), calls)
            await call(breakers, "fusion", None, calls)
        assert await breakers.state("fusion") == "closed"

    asyncio.run(run())


def test_tried_again_after_reset_and_closed_by_a_success():
    async def run():
        # reset_s leaves room for a loaded machine between the two calls (at 0.2 s it half-opened in between)
        breakers, calls = Breakers(threshold=1, reset_s=1.0), []
        with pytest.raises(asyncio.TimeoutError):
            await call(breakers, "rerank", asyncio.TimeoutError(), calls)
        with pytest.raises(CircuitOpen):
            await call(breakers, "rerank", None, calls)
        await asyncio.sleep(1.05)
        await call(breakers, "rerank", None, calls)  # half-open: this one goes through
        assert await breakers.state("rerank") == "closed"
        assert calls == ["rerank", "rerank"]

    asyncio.run(run())


def test_a_failure_while_half_open_opens_it_again():
    async def run():
        breakers, calls = Breakers(threshold=1, reset_s=0.2), []
        with pytest.raises(asyncio.TimeoutError):
            await call(breakers, "expansion", asyncio.TimeoutError(), calls)
        await asyncio.sleep(0.25)
        with pytest.raises(asyncio.TimeoutError):
            await call(breakers, "expansion", asyncio.TimeoutError(), calls)
        assert await breakers.state("expansion") == "opened"

    asyncio.run(run())
