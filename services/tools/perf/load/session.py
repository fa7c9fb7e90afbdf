"""One `hybridsearch loadtest` command: its plan, its runs in order, and the report they add up to.

Modes: `open` (one open-loop run per scenario), `closed` (one closed-loop run per scenario), `ramp`
(the knee finder per scenario), `mixed` (per scenario, the same open-loop query load first alone,
then beside a writer upserting documents at `write_rate` docs/s; the writer has its own figures and
deletes what it wrote afterwards unless asked to keep it) and `burst` (per scenario, `bursts` bursts of
`burst_size` requests sent at once, `burst_gap_s` apart, each with the deadline `deadline_s`: what the
gateway's admission answers, queues or sheds). Ctrl-C stops scheduling at once; what was
measured so far is summarised and reported (a second Ctrl-C aborts without a report).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import signal
import statistics
import sys
from collections import defaultdict
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field
from pathlib import Path

import grpc

from hybridsearch.runtime.iterables import batched
from hybridsearch.tools.perf.cpu import QUERY_EMBEDS, BaselineCpu, CpuFigure, embedded_estimate, pooled_ms
from hybridsearch.tools.perf.flame import Profilers, ProfileSpec
from hybridsearch.tools.perf.load.arrivals import ARRIVALS, bursts, schedule
from hybridsearch.tools.perf.load.bounds import (MAX_CHANNELS, MAX_OUTSTANDING, MAX_REQUESTS, MAX_TOTAL_S,
                                                 LoadBoundsError, check_loopback, check_run, outstanding_cap)
from hybridsearch.tools.perf.load.calls import ChannelPool, SearchCall, UpsertCall
from hybridsearch.tools.perf.load.drivers import Call, closed_loop, open_loop
from hybridsearch.tools.perf.load.memory import RssSampler
from hybridsearch.tools.perf.load.ramp import default_steps, run_ramp
from hybridsearch.tools.perf.load.recorder import Recorder
from hybridsearch.tools.perf.load.scenarios import SCENARIOS, search_requests
from hybridsearch.tools.perf.load.writer import corpus_documents, delete_written, synthetic_documents
from hybridsearch.tools.perf.procs import cpu_ms_per_request, snapshot

MODES = ("open", "closed", "ramp", "mixed", "burst")
MAX_BURSTS = 100
COMPARED = ("p50", "p90", "p99", "p99.9")
# The runs a scenario's CPU headline comes from, by kind, and how the headline names them.
HEADLINE_KINDS = {"closed": "closed loop, {plan.workers} workers", "open": "open loop, {plan.rate:g}/s",
                  "ramp-step": "ramp, {runs} steps pooled", "no-writes": "open loop, {plan.rate:g}/s, no writes",
                  "burst": "{plan.bursts} bursts of {plan.burst_size}"}


@dataclass
class LoadPlan:
    """Everything a command was asked to do (the JSON report's `parameters`, queries aside)."""

    mode: str
    address: str
    collection: str
    queries: list[str]
    scenarios: list[str] = field(default_factory=lambda: ["fast"])
    rate: float = 20.0
    arrivals: str = "poisson"
    duration_s: float = 10.0
    workers: int = 4
    steps: list[float] = field(default_factory=default_steps)
    step_s: float = 10.0
    p99_limit_ms: float = 100.0
    max_error_rate: float = 0.01
    patience: int = 2
    write_rate: float = 5.0
    write_batch: int = 1
    write_corpus: Path | None = None
    keep_written: bool = False
    write_deadline_s: float = 10.0
    burst_size: int = 40
    bursts: int = 1
    burst_gap_s: float = 2.0
    top_k: int = 10
    deadline_s: float = 2.0
    channels: int = 4
    max_outstanding: int | None = None
    stage_timings: bool = False
    warmup: int = 5
    seed: int = 0
    zipf: float = 0.0  # > 0: `queries` is load.scenarios.zipf_sequence of the dataset's with this exponent
    rss_pids: dict[str, int] = field(default_factory=dict)
    cpu_pids: dict[str, int] = field(default_factory=dict)  # CPU per answer of these processes, each run
    baseline_cpu: BaselineCpu | None = None  # the in-process baseline's CPU per query, for the ratio
    profile: ProfileSpec | None = None  # py-spy on every Python service during the (one) closed-loop run
    query_cache: bool = False  # the stack keeps query vectors: a cycled query is embedded once

    def planned_s(self) -> float:
        """Scheduled seconds of the whole command (drains and warm-ups aside)."""
        per_scenario = {"open": self.duration_s, "closed": self.duration_s, "mixed": 2 * self.duration_s,
                        "ramp": len(self.steps) * self.step_s,
                        "burst": self.bursts * self.burst_gap_s}[self.mode]
        return per_scenario * len(self.scenarios)

    def check(self) -> None:
        """Raises LoadBoundsError (or ValueError) when the plan targets anything but loopback or is too big."""
        if self.mode not in MODES:
            raise ValueError(f"unknown mode {self.mode!r}: choose from {', '.join(MODES)}")
        if self.arrivals not in ARRIVALS:
            raise ValueError(f"unknown arrivals {self.arrivals!r}: choose from {', '.join(ARRIVALS)}")
        if unknown := [s for s in self.scenarios if s not in SCENARIOS]:
            raise ValueError(f"unknown scenarios {unknown}")
        check_loopback(self.address)
        if self.mode == "ramp":
            for rate in self.steps:
                check_run(self.step_s, rate)
        elif self.mode == "burst":
            check_run(self.bursts * self.burst_gap_s)
            if not 1 <= self.burst_size <= MAX_OUTSTANDING or not 1 <= self.bursts <= MAX_BURSTS:
                raise LoadBoundsError(f"a burst is 1-{MAX_OUTSTANDING} requests, 1-{MAX_BURSTS} bursts")
        else:
            check_run(self.duration_s, self.rate, self.workers)
        if self.mode == "mixed":
            check_run(self.duration_s, self.write_rate / self.write_batch)
        if not 1 <= self.channels <= MAX_CHANNELS or not 1 <= self.write_batch <= 1000 or self.deadline_s <= 0:
            raise LoadBoundsError("channels 1-64, write batch 1-1000 and a positive deadline")
        if self.planned_s() > MAX_TOTAL_S:
            raise LoadBoundsError(f"the command would run {self.planned_s():.0f} s; the limit is {MAX_TOTAL_S:.0f} s")
        if self.profile is not None and (self.mode != "closed" or len(self.scenarios) != 1 or not self.cpu_pids):
            raise ValueError("--profile: one closed-loop run of one scenario, with the stack's processes found "
                             "(samples of two scenarios cannot be told apart)")

    def parameters(self) -> dict:
        params = asdict(self)
        params["queries"] = len(self.queries)
        params["distinct_queries"] = len(set(self.queries))
        params["write_corpus"] = str(self.write_corpus) if self.write_corpus else None
        return params


class Session:
    """Runs a plan's runs one after another on one event loop and keeps every figure."""

    def __init__(self, plan: LoadPlan, pool: ChannelPool, stop: asyncio.Event, origin: float) -> None:
        self.plan = plan
        self.pool = pool
        self.stop = stop
        self.origin = origin
        self.runs: list[dict] = []
        self.ramps: dict[str, dict] = {}
        self.mixed: dict[str, dict] = {}
        self.stages: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
        self.cpu_before: dict[str, dict] = {}
        self.profile: Path | None = None

    def _recorder(self, name: str, deadline_s: float | None = None) -> Recorder:
        loop = asyncio.get_running_loop()
        if self.plan.cpu_pids:  # CPU seconds of each measured process from here to the run's _keep
            self.cpu_before[name] = snapshot(self.plan.cpu_pids)
        return Recorder(name, loop.time(), deadline_s or self.plan.deadline_s, self.origin)

    def _keep(self, summary: dict, scenario: str, kind: str, recorder: Recorder | None = None) -> dict:
        summary.update(scenario=scenario, kind=kind)
        if (before := self.cpu_before.pop(summary["name"], None)) is not None:
            # Per answered request (any code) and per OK answer; a run beside another (queries while
            # writing) shares the processes' CPU with it.
            after = snapshot(self.plan.cpu_pids)
            summary["cpu_ms_per_request"] = cpu_ms_per_request(before, after, summary["completed"])
            summary["cpu_ms_per_answer"] = cpu_ms_per_request(before, after, summary["ok"])
        self.runs.append(summary)
        if recorder is not None:
            for stage, values in recorder.stages.items():
                self.stages[scenario][stage].extend(values)
        return summary

    async def _open(self, recorder: Recorder, call: Call, rate: float, duration_s: float, seed: int) -> dict:
        offsets = schedule(rate, duration_s, self.plan.arrivals, seed, MAX_REQUESTS)
        ended = await open_loop(call, offsets, recorder, outstanding_cap(rate, self.plan.max_outstanding), self.stop,
                                drain_s=recorder.deadline_s + 1.0)
        return recorder.summary(duration_s, ended, rate)

    async def _warm(self, call: Call) -> None:
        for _ in range(self.plan.warmup):
            if self.stop.is_set():
                return
            await call()

    def _search(self, scenario: str) -> SearchCall:
        plan = self.plan
        requests = search_requests(scenario, plan.queries, plan.collection, plan.top_k, plan.stage_timings)
        return SearchCall(self.pool, requests, plan.deadline_s)

    async def open_run(self, scenario: str, call: SearchCall) -> None:
        recorder = self._recorder(scenario)
        summary = await self._open(recorder, call, self.plan.rate, self.plan.duration_s, self.plan.seed)
        self._keep(summary, scenario, "open", recorder)

    async def closed_run(self, scenario: str, call: SearchCall) -> None:
        recorder = self._recorder(scenario)
        ended = await closed_loop(call, self.plan.workers, self.plan.duration_s, recorder, self.stop,
                                  drain_s=self.plan.deadline_s + 1.0)
        self._keep(recorder.summary(self.plan.duration_s, ended), scenario, "closed", recorder)

    async def ramp(self, scenario: str, call: SearchCall) -> None:
        plan = self.plan

        async def step(qps: float) -> dict:
            recorder = self._recorder(f"{scenario} @ {qps:g} QPS")
            summary = await self._open(recorder, call, qps, plan.step_s, plan.seed + len(self.runs))
            return self._keep(summary, scenario, "ramp-step", recorder)

        self.ramps[scenario] = await run_ramp(step, plan.steps, plan.p99_limit_ms, plan.max_error_rate, plan.patience,
                                              self.stop)

    async def burst_run(self, scenario: str, call: SearchCall) -> None:
        plan = self.plan
        recorder = self._recorder(scenario)
        window = plan.bursts * plan.burst_gap_s
        ended = await open_loop(call, bursts(plan.burst_size, plan.bursts, plan.burst_gap_s), recorder,
                                plan.burst_size, self.stop, drain_s=recorder.deadline_s + 1.0)
        summary = recorder.summary(window, ended, plan.burst_size * plan.bursts / window)
        summary.update(burst_size=plan.burst_size, bursts=plan.bursts)
        self._keep(summary, scenario, "burst", recorder)

    def _writer(self) -> UpsertCall:
        plan = self.plan
        prefix = f"loadtest-{dt.datetime.now(dt.timezone.utc):%Y%m%dT%H%M%S}-{len(self.runs)}"
        documents = (corpus_documents(plan.write_corpus, prefix) if plan.write_corpus
                     else synthetic_documents(plan.queries, prefix, plan.seed))
        return UpsertCall(self.pool, plan.collection, batched(documents, plan.write_batch), plan.write_deadline_s)

    async def mixed_run(self, scenario: str, call: SearchCall) -> None:
        plan = self.plan
        alone = self._recorder(f"{scenario} (no writes)")
        without = self._keep(await self._open(alone, call, plan.rate, plan.duration_s, plan.seed),
                             scenario, "no-writes", alone)
        if self.stop.is_set():
            return
        writer = self._writer()
        queries, writes = self._recorder(f"{scenario} (+writes)"), self._recorder(f"{scenario} writes", plan.write_deadline_s)
        with_, written = await asyncio.gather(
            self._open(queries, call, plan.rate, plan.duration_s, plan.seed),
            self._open(writes, writer, plan.write_rate / plan.write_batch, plan.duration_s, plan.seed + 1))
        self._keep(with_, scenario, "with-writes", queries)
        self._keep(written, scenario, "writes")
        self.mixed[scenario] = {"without_writes": without["name"], "with_writes": with_["name"],
                                "writes": written["name"], "write_docs_per_s": plan.write_rate,
                                "comparison": compare(without, with_), **await self._clean(writer)}

    async def _clean(self, writer: UpsertCall) -> dict:
        if self.plan.keep_written or not writer.sent_ids:
            return {"documents_sent": len(writer.sent_ids), "documents_deleted": 0}
        try:
            deleted = await delete_written(self.pool, self.plan.collection, writer.sent_ids)
        except grpc.aio.AioRpcError as err:
            return {"documents_sent": len(writer.sent_ids), "cleanup_error": err.code().name}
        return {"documents_sent": len(writer.sent_ids), "documents_deleted": deleted}

    async def run_all(self) -> None:
        runner = {"open": self.open_run, "closed": self.closed_run, "ramp": self.ramp,
                  "mixed": self.mixed_run, "burst": self.burst_run}
        for scenario in self.plan.scenarios:
            if self.stop.is_set():
                return
            call = self._search(scenario)
            await self._warm(call)
            profiling = Profilers(self.plan.profile, self.plan.cpu_pids) if self.plan.profile else nullcontext()
            with profiling as profilers:
                await runner[self.plan.mode](scenario, call)
            if profilers is not None and self.runs:
                run = self.runs[-1]
                self.profile = profilers.write(run.get("cpu_ms_per_answer", {}), run["ok"], run["name"])

    def cpu_headlines(self) -> list[dict]:
        """Per scenario, CPU ms per OK answer of each process and their sum, against the baseline's when
        given: a closed or open run's, a ramp's steps pooled, the mixed run's queries without writes."""
        out = []
        for scenario in self.plan.scenarios:
            runs = [r for r in self.runs if r["scenario"] == scenario and r["kind"] in HEADLINE_KINDS
                    and r.get("cpu_ms_per_answer")]
            if not runs:
                continue
            label = f"{scenario} ({HEADLINE_KINDS[runs[0]['kind']].format(plan=self.plan, runs=len(runs))})"
            per_process = pooled_ms(runs)
            embedded = embedded_estimate(QUERY_EMBEDS.get(scenario), self.plan.query_cache)
            figure = self.plan.baseline_cpu.figure(per_process, embedded) if self.plan.baseline_cpu else CpuFigure(per_process)
            line = figure.line(label) + ("; query vector cache on (a cycled query is embedded once)"
                                         if self.plan.query_cache else "")
            out.append({"scenario": scenario, "label": label, "answers": sum(r["ok"] for r in runs),
                        "query_cache": self.plan.query_cache, **figure.as_dict(), "line": line})
        return out

    def results(self) -> dict:
        stages = {scenario: {stage: round(statistics.median(v), 3) for stage, v in per.items()}
                  for scenario, per in self.stages.items()}
        baseline = asdict(self.plan.baseline_cpu) if self.plan.baseline_cpu else None
        cpu = {"processes": self.plan.cpu_pids, "baseline": baseline, "headlines": self.cpu_headlines()}
        return {"runs": self.runs, "ramps": self.ramps, "mixed": self.mixed, "stages_median_ms": stages, "cpu": cpu,
                "profile": str(self.profile) if self.profile else None}


def compare(without: dict, with_: dict) -> dict:
    """Query latency, errors and goodput without and with the writer."""
    rows = {f"{p}_ms": (without["latency_ms"][p], with_["latency_ms"][p]) for p in COMPARED}
    rows.update({key: (without[key], with_[key]) for key in ("error_rate", "goodput_qps", "degraded")})
    return {key: {"without": a, "with": b, "change": None if a is None or b is None else round(b - a, 5)}
            for key, (a, b) in rows.items()}


def _on_interrupt(loop: asyncio.AbstractEventLoop, stop: asyncio.Event) -> bool:
    """First Ctrl-C: stop and report; a second one aborts. False where signals cannot be handled here."""
    def interrupt() -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()

    try:
        loop.add_signal_handler(signal.SIGINT, interrupt)
    except (NotImplementedError, RuntimeError, ValueError):  # not the main thread, or no signals
        return False
    return True


async def _execute(plan: LoadPlan) -> dict:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    handled = _on_interrupt(loop, stop)
    started = dt.datetime.now(dt.timezone.utc)
    origin = loop.time()
    pool = ChannelPool(plan.address, plan.channels)
    sampler = RssSampler(plan.rss_pids, origin) if plan.rss_pids else None
    finished = asyncio.Event()
    sampling = asyncio.create_task(sampler.run(finished)) if sampler else None
    session = Session(plan, pool, stop, origin)
    try:
        await session.run_all()
    finally:
        finished.set()
        if sampling:
            await sampling
        await pool.close()
        if handled:
            loop.remove_signal_handler(signal.SIGINT)
    return {"command": list(sys.argv), "started_at": started.isoformat(timespec="seconds"), "mode": plan.mode,
            "address": plan.address, "collection": plan.collection, "parameters": plan.parameters(),
            "interrupted": stop.is_set(), "elapsed_s": round(loop.time() - origin, 3), **session.results(),
            "rss": sampler.report() if sampler else None}


def execute(plan: LoadPlan) -> dict:
    """Runs the plan on a fresh event loop and returns the report (JSON-ready)."""
    plan.check()
    return asyncio.run(_execute(plan))
