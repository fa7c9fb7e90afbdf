"""Open and closed loop over any async call that returns an Outcome (gRPC in calls.py, fakes in tests).

Open loop: each request is sent when its schedule says, whatever is outstanding, so a slow server
cannot slow the client down; past `max_outstanding` in flight a due request is counted as dropped by
the client instead of queueing without bound. Closed loop: N workers, each sending its next request
when the previous one has returned. Both stop at the end of their window, at `max_requests`, or as
soon as `stop` is set (Ctrl-C); requests still in flight get `drain_s` to finish, then are cancelled
and counted as CANCELLED, so every scheduled request ends up counted exactly once.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable, Iterable

from hybridsearch.tools.perf.load.bounds import MAX_REQUESTS
from hybridsearch.tools.perf.load.recorder import CANCELLED, Outcome, Recorder

Call = Callable[[], Awaitable[Outcome]]
STOP_POLL_S = 0.2  # longest sleep between checks of `stop` while waiting for the next arrival


async def _timed(call: Call, recorder: Recorder, scheduled: float) -> None:
    loop = asyncio.get_running_loop()
    sent = loop.time()
    recorder.on_sent(scheduled, sent)
    try:
        outcome = await call()
    except asyncio.CancelledError:
        outcome = Outcome(code=CANCELLED)
    recorder.on_completed(scheduled, sent, loop.time(), outcome)


async def _drain(tasks: set[asyncio.Task], drain_s: float) -> None:
    if tasks:
        _, late = await asyncio.wait(set(tasks), timeout=drain_s)
        for task in late:
            task.cancel()
        await asyncio.gather(*late, return_exceptions=True)


async def _until(at: float, stop: asyncio.Event) -> None:
    """Sleeps until loop time `at`, waking early when `stop` is set."""
    loop = asyncio.get_running_loop()
    while (delay := at - loop.time()) > 0 and not stop.is_set():
        await asyncio.sleep(min(delay, STOP_POLL_S))


async def open_loop(call: Call, offsets: Iterable[float], recorder: Recorder, max_outstanding: int,
                    stop: asyncio.Event, drain_s: float) -> float:
    """Sends a request at recorder.origin + each offset; returns the loop time the last answer came back."""
    loop = asyncio.get_running_loop()
    in_flight: set[asyncio.Task] = set()
    for offset in offsets:
        due = recorder.origin + offset
        if due > loop.time():
            await _until(due, stop)
        else:
            await asyncio.sleep(0)  # behind schedule: send at once, but let answers be read
        if stop.is_set():
            break
        recorder.on_scheduled(due)
        if len(in_flight) >= max_outstanding:
            recorder.on_dropped(due)
            continue
        task = asyncio.create_task(_timed(call, recorder, due))
        in_flight.add(task)
        task.add_done_callback(in_flight.discard)
    await _drain(in_flight, drain_s)
    return loop.time()


async def closed_loop(call: Call, workers: int, duration_s: float, recorder: Recorder, stop: asyncio.Event,
                      drain_s: float, max_requests: int = MAX_REQUESTS) -> float:
    """`workers` concurrent senders until the window ends; returns the loop time the last answer came back."""
    loop = asyncio.get_running_loop()
    end = recorder.origin + duration_s
    tickets = itertools.count()

    async def worker() -> None:
        while not stop.is_set() and loop.time() < end and next(tickets) < max_requests:
            now = loop.time()
            recorder.on_scheduled(now)
            await _timed(call, recorder, now)

    tasks = {asyncio.create_task(worker()) for _ in range(workers)}
    await asyncio.wait(tasks, timeout=duration_s + drain_s)
    await _drain(tasks, 0)
    return loop.time()
