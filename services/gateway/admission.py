"""Admission control: a bounded number of requests in flight, a bounded and short wait for a slot.

A server that accepts everything under overload answers nobody in time: its queue grows, every answer
waits behind it, and the clients' deadlines expire while the work is still done. The gateway instead
holds at most `max_in_flight` searches; a request that finds them all busy waits in a FIFO line of at
most `max_queue`, for at most `max_wait_s` (never past its own deadline), and is otherwise refused at
once with RESOURCE_EXHAUSTED, which costs a fraction of a millisecond. Admitted requests then see the
latency of a busy but not drowning server, and the refused ones can go to another replica or retry
with backoff.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from contextlib import asynccontextmanager
from dataclasses import dataclass


class Overloaded(Exception):
    """No slot within the allowed wait: answer RESOURCE_EXHAUSTED. `reason`: queue_full | wait."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass
class AdmissionStats:
    admitted: int = 0
    rejected_queue_full: int = 0
    rejected_wait: int = 0


class Admission:
    def __init__(self, max_in_flight: int, max_queue: int, max_wait_s: float) -> None:
        if max_in_flight < 1 or max_queue < 0 or max_wait_s < 0:
            raise ValueError("max_in_flight >= 1, max_queue >= 0, max_wait_s >= 0")
        self.max_in_flight, self.max_queue, self.max_wait_s = max_in_flight, max_queue, max_wait_s
        self.in_flight = 0
        self._waiters: deque[asyncio.Future] = deque()
        self.stats = AdmissionStats()

    @property
    def queued(self) -> int:
        return len(self._waiters)

    async def _acquire(self, wait_s: float) -> None:
        if self.in_flight < self.max_in_flight and not self._waiters:
            self.in_flight += 1
            return
        if len(self._waiters) >= self.max_queue or wait_s <= 0:
            self.stats.rejected_queue_full += 1
            raise Overloaded("queue_full", f"{self.in_flight} searches in flight and {len(self._waiters)} waiting")
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await asyncio.wait_for(asyncio.shield(waiter), wait_s)
        except asyncio.TimeoutError:
            if waiter.done() and not waiter.cancelled():
                return  # the slot was handed over just as the wait ran out: keep it
            waiter.cancel()
            self.stats.rejected_wait += 1
            raise Overloaded("wait", f"no search slot within {wait_s * 1000:.0f} ms "
                             f"({self.in_flight} in flight, {len(self._waiters)} waiting)") from None
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self._release()  # handed a slot, then cancelled: pass it on
            else:
                waiter.cancel()
            raise
        finally:
            if waiter in self._waiters:
                self._waiters.remove(waiter)

    def _release(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)  # the slot passes straight to the oldest waiter
                return
        self.in_flight -= 1

    @asynccontextmanager
    async def slot(self, deadline_s: float):
        """Holds a slot for the body; yields the seconds spent waiting. Raises Overloaded."""
        started = time.perf_counter()
        await self._acquire(min(self.max_wait_s, deadline_s))
        self.stats.admitted += 1
        try:
            yield time.perf_counter() - started
        finally:
            self._release()
