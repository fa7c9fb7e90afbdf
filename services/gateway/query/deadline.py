"""One search's deadline and the errors a call to a part can end in."""

from __future__ import annotations

import asyncio
import time

import grpc

from hybridsearch.gateway.breakers import CircuitOpen

MIN_LEFT_S = 0.01  # what a call is given when the deadline has passed: it fails fast, it is not skipped


class Deadline:
    def __init__(self, seconds: float) -> None:
        self.end = time.monotonic() + seconds

    def left(self) -> float:
        return max(MIN_LEFT_S, self.end - time.monotonic())

    def remaining(self) -> float:
        """Seconds left, negative once passed (for decisions; calls take `left()`)."""
        return self.end - time.monotonic()


class Straggler(asyncio.TimeoutError):
    """A call that had not answered long after the others of its round did."""


# What a call to a part can fail with: an RPC error, its own budget running out, or its open breaker.
CALL_ERRORS = (grpc.aio.AioRpcError, asyncio.TimeoutError, CircuitOpen)


def reason(err: BaseException) -> str:
    """A failed call as its leg state or notice says it."""
    if isinstance(err, (CircuitOpen, Straggler)):
        return str(err)
    if isinstance(err, grpc.aio.AioRpcError):
        return f"{err.code().name}: {err.details()}"
    if isinstance(err, asyncio.TimeoutError):
        return "deadline exceeded"
    return f"{type(err).__name__}: {err}"
