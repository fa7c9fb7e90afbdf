"""Admission control: a bounded number of searches in flight, and a wait for a slot only when it can pay off.

A server that accepts everything under overload answers nobody in time: its queue grows, every answer
waits behind it, and the clients' deadlines expire while the work is still done. The gateway holds at
most `max_in_flight` searches; one that finds them all busy joins a FIFO line of at most `max_queue`
(a hard cap) only when it can still be answered in time, and is otherwise refused at once with
RESOURCE_EXHAUSTED, which costs a fraction of a millisecond. One pure decision (`decide`, table-tested),
in this order:

  1. a slot is free and nobody waits                       -> admitted (never refused: the query path
                                                              fits its work to the deadline it has left)
  2. `max_queue` already wait                              -> shed: queue_full
  3. expected wait + expected service > the deadline left  -> shed: deadline
  4. the queue is standing (below) and the expected wait
     is longer than the target                             -> shed: standing
  5. expected wait > `max_wait_s`                          -> shed: wait
  6. otherwise queue, waiting at most until the search can no longer finish in time (the deadline less its
     expected service), `max_wait_s`, and under a standing queue the target; a search still waiting then
     is refused (wait): the estimate was too hopeful.

The deadline is the request's own (the client's gRPC deadline, capped by the effort's deadline in the
gateway: gateway.query.search). The expected service time of a search is an exponentially weighted mean of
how long recent searches of its kind (effort: FAST and THOROUGH differ 1000x) held their slot
(`ServiceTimes`). The expected wait is when a slot would free up for it: the searches in flight are
expected to finish after their kind's mean less the time they have run, and each one waiting ahead
takes the first slot that frees (`expected_wait`); with one kind that is (position / slots) x service.

A standing queue is CoDel's (K. Nichols and V. Jacobson, "Controlling Queue Delay", ACM Queue 10(5),
2012): the queue is standing once every search that got a slot over the last `queue_interval_s` had
waited longer than `queue_target_s` (the minimum sojourn over an interval above the target), i.e. it
did not drain in that time. A short sojourn or an emptied line ends it; a queue standing again within an
interval of the end is standing at once (CoDel's re-entry: the overload goes on). While it stands, as
in Facebook's request queues ("Fail at scale", B. Maurer, ACM Queue 13(8), 2015: a queue not empty for
the last N ms gives new requests M << N ms), a newcomer queues only if it expects a slot within the
target, and waits at most that; the searches already queued keep their place (each fits its deadline).
So a burst, which drains, is admitted whole when it arrives within the interval, and sustained
overload keeps a line about one search deep instead of one as long as the deadlines allow.
"""

from __future__ import annotations

import asyncio
import heapq
import math
import time
from collections import deque
from collections.abc import Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import AsyncIterator, Literal

from hybridsearch.runtime import metrics

QUEUE_TARGET_S = 0.01  # CoDel's target: a wait for a slot this short is no standing queue
QUEUE_INTERVAL_S = 0.2  # CoDel's interval: waits above the target this long are a standing queue
ESTIMATE_WEIGHT = 0.2  # the newest slot hold time's weight in its kind's mean
REASONS = ("queue_full", "deadline", "standing", "wait")  # the RESOURCE_EXHAUSTED reasons (metrics.REJECTED)
Verdict = Literal["admit", "queue", "shed"]
ADMIT: Verdict = "admit"
QUEUE: Verdict = "queue"
SHED: Verdict = "shed"


class Overloaded(Exception):
    """No slot in time: answer RESOURCE_EXHAUSTED. `reason`: one of REASONS."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms"


class ServiceTimes:
    """How long a search of each kind is expected to hold its slot: the exponentially weighted mean of the
    hold times seen. A kind not seen yet is expected to take 0 s (admitted on hope; its wait is bounded)."""

    def __init__(self, weight: float = ESTIMATE_WEIGHT) -> None:
        if not 0 < weight <= 1:
            raise ValueError("the estimate's weight is in (0, 1]")
        self.weight = weight
        self._mean: dict[str, float] = {}

    def estimate(self, kind: str) -> float:
        return self._mean.get(kind, 0.0)

    def observe(self, kind: str, seconds: float) -> None:
        mean = self._mean.get(kind)
        self._mean[kind] = seconds if mean is None else mean + self.weight * (seconds - mean)


def expected_wait(running: Sequence[float], queued: Sequence[float], capacity: int) -> float:
    """When a search joining the line now would get a slot: `running` the expected seconds left of each
    search in flight, `queued` the expected service of each one waiting ahead (FIFO), `capacity` slots.
    Each queued search takes the first slot that frees; the newcomer the first free after them."""
    frees = [0.0] * max(0, capacity - len(running)) + [max(0.0, left) for left in running]
    heapq.heapify(frees)
    for service in queued:
        heapq.heapreplace(frees, frees[0] + service)
    return frees[0]


class StandingQueue:
    """CoDel's test on the sojourn (wait for a slot) of each search as it gets its slot: standing once every
    sojourn over `interval_s` was above `target_s`; a sojourn at or below the target (an admission without
    waiting included), or a line left empty, ends it. As in CoDel, a queue that stands again within an
    interval of having stood counts as standing at once (it never drained for long: the overload goes on)."""

    def __init__(self, target_s: float = QUEUE_TARGET_S, interval_s: float = QUEUE_INTERVAL_S) -> None:
        if target_s < 0 or interval_s <= 0:
            raise ValueError("queue target >= 0 and interval > 0")
        self.target_s, self.interval_s = target_s, interval_s
        self.above_since: float | None = None  # when the sojourns went above the target and stayed there
        self.ended: float = -math.inf  # when it last stopped standing

    def on_slot(self, sojourn_s: float, now: float, left_waiting: int = 1) -> None:
        """A search got its slot after `sojourn_s`, leaving `left_waiting` in the line."""
        if sojourn_s <= self.target_s or not left_waiting:
            if self.standing(now):
                self.ended = now
            self.above_since = None
        elif self.above_since is None:
            recent = now - self.ended < self.interval_s
            self.above_since = now - self.interval_s if recent else now

    def standing(self, now: float) -> bool:
        return self.above_since is not None and now - self.above_since >= self.interval_s


@dataclass(frozen=True)
class Decision:
    verdict: Verdict  # ADMIT (a slot now), QUEUE (wait at most wait_s) or SHED (refuse now, for `reason`)
    reason: str = ""
    wait_s: float = 0.0
    message: str = ""


def decide(*, free: bool, queued: int, max_queue: int, wait_s: float, service_s: float, deadline_s: float,
           max_wait_s: float, standing: bool, target_s: float) -> Decision:
    """The admission rule (the module's docstring): `free` whether a slot is free, `queued` how many wait,
    `wait_s` / `service_s` this search's expected wait and service, `deadline_s` what is left of its deadline,
    `standing` whether the queue is standing, `target_s` the wait a standing queue still allows."""
    if free and queued == 0:
        return Decision(ADMIT)
    if queued >= max_queue:
        return Decision(SHED, "queue_full", message=f"{queued} searches already waiting (max_queue)")
    start_by = deadline_s - service_s
    if wait_s > start_by:
        return Decision(SHED, "deadline", message=f"expected wait {_ms(wait_s)} + service {_ms(service_s)} "
                                                  f"exceeds the {_ms(deadline_s)} left of the deadline")
    if standing and queued and wait_s > target_s:
        return Decision(SHED, "standing", message=f"the queue is standing and the expected wait "
                                                  f"{_ms(wait_s)} is over its target {_ms(target_s)}")
    if wait_s > max_wait_s:
        return Decision(SHED, "wait",
                        message=f"expected wait {_ms(wait_s)} exceeds max_wait {_ms(max_wait_s)}")
    limit = min(start_by, max_wait_s, target_s if standing and queued else math.inf)
    return Decision(QUEUE, wait_s=limit)


@dataclass(eq=False)
class _Ticket:
    """One search's claim: its kind, when it arrived, when it got its slot, and its place in the line."""

    kind: str
    arrived: float
    started: float = 0.0
    future: asyncio.Future | None = None


@dataclass
class AdmissionStats:
    admitted: int = 0
    rejected_queue_full: int = 0
    rejected_deadline: int = 0
    rejected_standing: int = 0
    rejected_wait: int = 0

    def rejected(self, reason: str) -> None:
        setattr(self, f"rejected_{reason}", getattr(self, f"rejected_{reason}") + 1)


class Admission:
    """Slots, their FIFO line and the rule above. `queue_interval_s` None: no standing-queue test (writes,
    which are patient and bounded by max_wait_s)."""

    def __init__(self, max_in_flight: int, max_queue: int, max_wait_s: float = math.inf, *,
                 queue_target_s: float = QUEUE_TARGET_S, queue_interval_s: float | None = QUEUE_INTERVAL_S,
                 estimate_weight: float = ESTIMATE_WEIGHT,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if max_in_flight < 1 or max_queue < 0 or max_wait_s < 0:
            raise ValueError("max_in_flight >= 1, max_queue >= 0, max_wait_s >= 0")
        self.max_in_flight, self.max_queue, self.max_wait_s = max_in_flight, max_queue, max_wait_s
        self.service = ServiceTimes(estimate_weight)
        self.queue = StandingQueue(queue_target_s, queue_interval_s) if queue_interval_s is not None else None
        self.clock = clock
        self._running: set[_Ticket] = set()
        self._waiters: deque[_Ticket] = deque()
        self.stats = AdmissionStats()
        metrics.initialise(metrics.REJECTED, "reason", REASONS)

    @property
    def in_flight(self) -> int:
        return len(self._running)

    @property
    def queued(self) -> int:
        return len(self._waiters)

    def expected_wait(self, now: float) -> float:
        """When a search joining the line now would get a slot (the estimates of its kind and those ahead)."""
        running = [self.service.estimate(t.kind) - (now - t.started) for t in self._running]
        queued = [self.service.estimate(t.kind) for t in self._waiters if t.future and not t.future.done()]
        return expected_wait(running, queued, self.max_in_flight)

    def decision(self, kind: str, deadline_s: float, now: float) -> Decision:
        free = len(self._running) < self.max_in_flight
        standing = self.queue is not None and self.queue.standing(now)
        return decide(free=free, queued=len(self._waiters), max_queue=self.max_queue,
                      wait_s=0.0 if free and not self._waiters else self.expected_wait(now),
                      service_s=self.service.estimate(kind), deadline_s=deadline_s,
                      max_wait_s=self.max_wait_s, standing=standing,
                      target_s=self.queue.target_s if self.queue else 0.0)

    def _start(self, ticket: _Ticket, now: float) -> None:
        ticket.started = now
        self._running.add(ticket)
        if self.queue is not None:
            self.queue.on_slot(now - ticket.arrived, now, len(self._waiters))

    def _refuse(self, reason: str, message: str) -> Overloaded:
        self.stats.rejected(reason)
        return Overloaded(reason, f"{message}; {self.in_flight} in flight, {self.queued} waiting")

    async def _acquire(self, ticket: _Ticket, deadline_s: float) -> None:
        decision = self.decision(ticket.kind, deadline_s, ticket.arrived)
        if decision.verdict == ADMIT:
            self._start(ticket, ticket.arrived)
            return
        if decision.verdict == SHED:
            raise self._refuse(decision.reason, decision.message)
        ticket.future = asyncio.get_running_loop().create_future()
        self._waiters.append(ticket)
        try:
            await asyncio.wait_for(asyncio.shield(ticket.future), decision.wait_s)
        except asyncio.TimeoutError:
            if ticket.future.done() and not ticket.future.cancelled():
                return  # the slot was handed over just as the wait ran out: keep it
            ticket.future.cancel()
            raise self._refuse("wait", f"no search slot within {_ms(decision.wait_s)}") from None
        except asyncio.CancelledError:
            if ticket.future.done() and not ticket.future.cancelled():
                self._release(ticket)  # handed a slot, then cancelled: pass it on
            else:
                ticket.future.cancel()
            raise
        finally:
            if ticket in self._waiters:
                self._waiters.remove(ticket)

    def _release(self, ticket: _Ticket) -> None:
        self._running.discard(ticket)
        now = self.clock()
        while self._waiters:
            waiter = self._waiters.popleft()
            if waiter.future is not None and not waiter.future.done():
                self._start(waiter, now)  # the slot passes straight to the oldest waiter
                waiter.future.set_result(None)
                return

    @asynccontextmanager
    async def slot(self, deadline_s: float, kind: str = "") -> AsyncIterator[float]:
        """Holds a slot for the body; yields the seconds spent waiting. `deadline_s`: what is left of the
        request's deadline; `kind`: whose service times it shares (the effort). Raises Overloaded."""
        ticket = _Ticket(kind, self.clock())
        await self._acquire(ticket, deadline_s)
        self.stats.admitted += 1
        try:
            yield ticket.started - ticket.arrived
        finally:
            self.service.observe(kind, self.clock() - ticket.started)
            self._release(ticket)
