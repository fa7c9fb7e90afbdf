"""Circuit breakers for the gateway's calls, one per part (purgatory, a kept library).

A part that fails `threshold` times in a row is skipped for `reset_s` seconds (the answer says so
at once, no call is made), then tried again: a success closes its breaker, a failure opens it for
another `reset_s`. Only failures that say the part is unwell count: UNAVAILABLE, DEADLINE_EXCEEDED
(the call's own budget ran out), INTERNAL/UNKNOWN, and timeouts; a caller's mistake
(INVALID_ARGUMENT, NOT_FOUND, ...) and a cancelled call pass through without counting.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import grpc
from purgatory import AsyncCircuitBreakerFactory
from purgatory.domain.model import OpenedState

from hybridsearch.runtime import metrics

UNWELL = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.INTERNAL,
                    grpc.StatusCode.UNKNOWN, grpc.StatusCode.RESOURCE_EXHAUSTED})


class CircuitOpen(Exception):
    """Raised instead of calling a part whose breaker is open."""

    def __init__(self, part: str, reset_s: float) -> None:
        super().__init__(f"circuit open: {part} failed repeatedly, skipped (tried again within {reset_s:g}s)")
        self.part = part


def counts_as_failure(err: BaseException) -> bool:
    """A part's RPC error counts by its code; any other error of the call (a timeout, Triton's client
    errors) counts; a cancellation (the caller went away) does not."""
    if isinstance(err, grpc.aio.AioRpcError):
        return err.code() in UNWELL
    return isinstance(err, Exception) and not isinstance(err, asyncio.CancelledError)


class Breakers:
    def __init__(self, threshold: int, reset_s: float) -> None:
        self.reset_s = reset_s
        # purgatory counts an exception as a failure unless it is excluded: exclude what is not the part's fault.
        self.factory = AsyncCircuitBreakerFactory(
            default_threshold=threshold, default_ttl=reset_s,
            exclude=[(BaseException, lambda err: not counts_as_failure(err))],
        )
        self.factory.add_listener(self._on_event)

    @staticmethod
    def _on_event(name: str, event_name: str, event) -> None:
        if event_name == "state_changed":
            metrics.BREAKER_OPEN.labels(part=name).set(1 if event.state == "opened" else 0)

    def of(self, part: str) -> Breaker:
        """`part`'s breaker, bound once by the stage that calls it."""
        return Breaker(self, part)

    async def state(self, part: str) -> str:
        return (await self.factory.get_breaker(part)).context.state

    @asynccontextmanager
    async def guard(self, part: str) -> AsyncIterator[None]:
        """Runs the block as one call to `part`; raises CircuitOpen without running it while open."""
        breaker = await self.factory.get_breaker(part)
        try:
            async with breaker:
                yield
        except OpenedState as err:
            raise CircuitOpen(part, self.reset_s) from err


class Breaker:
    """One part's breaker (Breakers.of): `async with breaker.guard():` runs the block as one call to the part."""

    def __init__(self, breakers: Breakers, part: str) -> None:
        self.breakers, self.part = breakers, part

    def guard(self):
        return self.breakers.guard(self.part)
