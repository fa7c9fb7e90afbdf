"""The kill drill: steady load through the gateway while one part of the stack is killed (SIGKILL) and
brought back by the stack's supervisor, measured answer by answer.

For each answer: when it was sent and answered, its gRPC code, and whether it was flagged (degraded
or a notice) naming the killed part. A drill reports

  sent, failed (any code but OK), by code; flagged answers; answers sent and answered while the part was down (each must name it);
  restart_s  from the kill until the part is ready again (its health check / port answers);
  recover_s  from the part's return until the last answer that was still flagged was sent (0: the
             first answer after the return was already clean).

Goals (issue 16): no failed request while a retrieval leg is up, recover_s <= 5.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import grpc

from hybridsearch.tools.perf.load.arrivals import schedule
from hybridsearch.tools.perf.load.calls import ChannelPool
from hybridsearch.tools.perf.load.drivers import open_loop
from hybridsearch.tools.perf.load.recorder import Outcome, Recorder
from hybridsearch.v1 import search_pb2

FAILED, FALLBACK = search_pb2.LEG_STATE_FAILED, search_pb2.LEG_STATE_FALLBACK
MAX_DRILL_S = 120.0
AFTER_RETURN_S = 6.0  # load keeps running this long after the part is back


def _leg_named(leg: str) -> Callable[[search_pb2.SearchResponse], bool]:
    return lambda r: any(l.name == leg and l.state in (FAILED, FALLBACK) for l in r.legs)


def _notice_names(word: str) -> Callable[[search_pb2.SearchResponse], bool]:
    return lambda r: any(word.lower() in n.lower() for n in r.notices)


# How an answer names each part when that part is down.
NAMES_PART: dict[str, Callable[[search_pb2.SearchResponse], bool]] = {
    "bm25": _leg_named("bm25"),
    "vector": _leg_named("vector"),
    "expansion": _leg_named("expansion"),
    "fusion": _notice_names("fusion service"),
    "redis": _notice_names("Redis"),  # the state Redis: writes and drops use it, a search never does
    "redis-cache": _notice_names("Redis"),  # the caches a search uses
    "triton": _leg_named("rerank"),
    "llm": _leg_named("expansion"),
}


@dataclass
class Answer:
    sent: float
    done: float
    code: str
    degraded: bool = False
    names_part: bool = False


@dataclass
class DrillResult:
    part: str
    scenario: str
    rate: float
    sent: int = 0
    failed: int = 0
    codes: dict[str, int] = field(default_factory=dict)
    degraded: int = 0
    flagged: int = 0
    during: int = 0  # answers sent and answered while the part was down (between the kill and its return)
    restart_s: float | None = None
    recover_s: float | None = None
    p99_ms: float | None = None

    def row(self) -> dict:
        return asdict(self)


def summarise(part: str, scenario: str, rate: float, answers: list[Answer], killed: float,
              returned: float | None) -> DrillResult:
    """Pure: the drill's figures from its answers and the kill/return times (same clock)."""
    codes = Counter(a.code for a in answers)
    latencies = sorted(a.done - a.sent for a in answers)
    result = DrillResult(part, scenario, rate, sent=len(answers), failed=sum(n for c, n in codes.items() if c != "OK"),
                         codes=dict(codes), degraded=sum(a.degraded for a in answers),
                         flagged=sum(a.names_part for a in answers))
    if latencies:
        result.p99_ms = round(latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))] * 1000, 1)
    if returned is not None:
        result.restart_s = round(returned - killed, 2)
        result.during = sum(killed <= a.sent and a.done < returned for a in answers)
        late = [a.sent for a in answers if a.sent >= returned and (a.names_part or a.code != "OK")]
        result.recover_s = round(max(late) - returned, 2) if late else 0.0
    return result


class _Logged:
    """A Search call that keeps every answer (the Recorder keeps only aggregates)."""

    def __init__(self, pool: ChannelPool, requests: Callable[[], search_pb2.SearchRequest],
                 names_part: Callable[[search_pb2.SearchResponse], bool], timeout_s: float) -> None:
        self.pool, self.requests, self.names_part, self.timeout_s = pool, requests, names_part, timeout_s
        self.answers: list[Answer] = []

    async def __call__(self) -> Outcome:
        sent = time.monotonic()
        try:
            response = await self.pool.search().Search(self.requests(), timeout=self.timeout_s)
        except grpc.aio.AioRpcError as err:
            self.answers.append(Answer(sent, time.monotonic(), err.code().name))
            return Outcome(code=err.code().name)
        self.answers.append(Answer(sent, time.monotonic(), "OK", response.degraded, self.names_part(response)))
        return Outcome(degraded=response.degraded)


async def kill_drill(stack, part: str, scenario: str, requests: Callable[[], search_pb2.SearchRequest],
                     rate: float, kill_at_s: float = 3.0, timeout_s: float = 10.0,
                     ready_timeout_s: float = 90.0) -> DrillResult:
    """Load at `rate` QPS; `kill_at_s` in, SIGKILL `part`; the load runs on until AFTER_RETURN_S after the
    part is ready again (or ready_timeout_s passes). `stack` is a running launcher.Stack."""
    pool = ChannelPool(stack.settings.endpoints.addr("gateway"), size=2)
    call = _Logged(pool, requests, NAMES_PART[part], timeout_s)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    recorder = Recorder(part, loop.time(), timeout_s)
    times: dict[str, float] = {}

    async def fault() -> None:
        await asyncio.sleep(kill_at_s)
        old = await asyncio.to_thread(stack.pid, part)
        times["killed"] = time.monotonic()
        await asyncio.to_thread(stack.kill, part)
        end = times["killed"] + ready_timeout_s
        while time.monotonic() < end:
            await asyncio.sleep(0.05)
            try:
                back = await asyncio.to_thread(stack.pid, part) != old and await asyncio.to_thread(stack.ready, part)
            except (ProcessLookupError, OSError):
                back = False
            if back:
                times["returned"] = time.monotonic()
                await asyncio.sleep(AFTER_RETURN_S)
                break
        stop.set()

    faulting = asyncio.create_task(fault())
    try:
        await open_loop(call, schedule(rate, MAX_DRILL_S, "constant"), recorder, max_outstanding=64, stop=stop,
                        drain_s=timeout_s)
        await faulting
    finally:
        faulting.cancel()
        await pool.close()
    return summarise(part, scenario, rate, call.answers, times["killed"], times.get("returned"))


def markdown_table(results: list[DrillResult]) -> str:
    lines = ["| part | load | sent | failed | sent while down | named the part | restart s | recover s | p99 ms |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        lines.append(f"| {r.part} | {r.scenario} @ {r.rate:g} QPS | {r.sent} | {r.failed} | {r.during} | {r.flagged} "
                     f"| {r.restart_s} | {r.recover_s} | {r.p99_ms} |")
    return "\n".join(lines)
