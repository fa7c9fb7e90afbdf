"""The load generator's pure parts, without a stack: schedules, bounds, coordinated-omission
correction, drops, the knee, answers read into outcomes, plots and the report."""

from __future__ import annotations

import asyncio
import io
import json
import statistics

import pytest
from rich.console import Console

from hybridsearch.tools.perf.load.arrivals import bursts, schedule
from hybridsearch.tools.perf.load.bounds import LoadBoundsError, check_loopback, outstanding_cap
from hybridsearch.tools.perf.load.calls import outcome_of
from hybridsearch.tools.perf.load.drivers import closed_loop, open_loop
from hybridsearch.tools.perf.load.ramp import default_steps, find_knee, parse_steps, run_ramp, stop_reason
from hybridsearch.tools.perf.load.recorder import TOOK_STAGE, Outcome, Recorder
from hybridsearch.tools.perf.load.report import print_summary, write_outputs
from hybridsearch.tools.perf.load.session import LoadPlan, compare
from hybridsearch.v1 import search_pb2

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_poisson_arrivals_have_the_offered_mean_rate_and_exponential_gaps():
    offsets = list(schedule(200.0, 50.0, "poisson", seed=7))
    assert abs(len(offsets) / 50.0 - 200.0) / 200.0 < 0.03  # 10,000 expected; the count's sd is 1%
    gaps = [b - a for a, b in zip(offsets, offsets[1:])]
    assert abs(statistics.mean(gaps) - 1 / 200) < 0.03 / 200
    assert 0.9 < statistics.stdev(gaps) / statistics.mean(gaps) < 1.1  # exponential: sd = mean
    assert offsets == sorted(offsets) and offsets[-1] < 50.0
    assert offsets[:100] == list(schedule(200.0, 50.0, "poisson", seed=7))[:100]
    assert offsets[:100] != list(schedule(200.0, 50.0, "poisson", seed=8))[:100]


def test_constant_arrivals_and_the_request_bound():
    assert list(schedule(4.0, 1.0, "constant")) == [0.0, 0.25, 0.5, 0.75]
    assert len(list(schedule(1000.0, 100.0, "constant", limit=123))) == 123
    with pytest.raises(ValueError):
        list(schedule(1.0, 1.0, "bursty"))


async def test_a_burst_is_due_at_once_and_sent_at_once():
    assert list(bursts(3, 2, 0.5)) == [0.0, 0.0, 0.0, 0.5, 0.5, 0.5]
    loop = asyncio.get_running_loop()
    inside, most = 0, 0

    async def server() -> Outcome:
        nonlocal inside, most
        inside += 1
        most = max(most, inside)
        await asyncio.sleep(0.05)
        inside -= 1
        return Outcome()

    recorder = Recorder("burst", loop.time(), 1.0)
    await open_loop(server, bursts(40), recorder, 40, asyncio.Event(), drain_s=1.0)
    assert recorder.scheduled == recorder.completed == 40 and recorder.dropped == 0
    assert most == 40  # all forty outstanding together
    assert recorder.send_lag.get_max_value() < 25_000


def test_only_loopback_targets():
    for ok in ("127.0.0.1:50051", "127.3.2.1:1", "localhost:50051", "[::1]:50051"):
        assert check_loopback(ok) == ok
    for bad in ("192.0.2.1:50051", "example.com:50051", "127.0.0.1.example.com:50051", "0.0.0.0:50051",
                "[2001:db8::1]:50051", "127.0.0.1", "localhost:port"):
        with pytest.raises(LoadBoundsError):
            check_loopback(bad)
    assert outstanding_cap(20.0) == 200 and outstanding_cap(1000.0) == 2000 and outstanding_cap(0.1) == 10
    assert outstanding_cap(50.0, requested=7) == 7


def test_plans_are_bounded():
    plan = LoadPlan(mode="open", address="127.0.0.1:1", collection="c", queries=["q"])
    plan.check()
    LoadPlan(mode="burst", address="127.0.0.1:1", collection="c", queries=["q"], burst_size=40, bursts=3).check()
    for change in ({"duration_s": 601.0}, {"rate": 1e6}, {"address": "198.51.100.1:1"}, {"mode": "soak"},
                   {"mode": "ramp", "steps": [10.0] * 20, "step_s": 600.0}, {"scenarios": ["nope"]},
                   {"mode": "burst", "burst_size": 5000}, {"mode": "burst", "bursts": 0},
                   {"mode": "burst", "bursts": 10, "burst_gap_s": 61.0}):
        bad = LoadPlan(**{**plan.__dict__, **change})
        with pytest.raises(ValueError):
            bad.check()


def test_latency_is_measured_from_the_scheduled_send_time():
    recorder = Recorder("co", origin=100.0, deadline_s=0.2)
    # due at 100.0, sent 300 ms late (a client or a queue that fell behind), answered 50 ms after sending
    recorder.on_scheduled(100.0)
    recorder.on_sent(100.0, 100.3)
    recorder.on_completed(100.0, 100.3, 100.35, Outcome())
    summary = recorder.summary(window_s=1.0, ended=100.35, offered_qps=1.0)
    assert summary["latency_ms"]["p50"] == pytest.approx(350, rel=0.002)
    assert summary["service_time_ms"]["p50"] == pytest.approx(50, rel=0.002)
    assert summary["send_lag_ms"]["p50"] == pytest.approx(300, rel=0.002)
    assert summary["goodput_qps"] == 0.0  # OK, but 350 ms > the 200 ms deadline
    assert summary["client_limited"]


async def test_open_loop_sees_a_stall_that_a_closed_loop_hides():
    loop = asyncio.get_running_loop()
    stall = {"until": 0.0}

    async def server() -> Outcome:  # answers at once, but nothing before the stall ends
        await asyncio.sleep(max(0.0, stall["until"] - loop.time()) + 0.001)
        return Outcome()

    opened = Recorder("open", loop.time(), 5.0)
    stall["until"] = opened.origin + 0.5
    await open_loop(server, schedule(50.0, 1.0, "constant"), opened, 1000, asyncio.Event(), drain_s=2.0)
    assert opened.scheduled == opened.sent == opened.completed == 50
    # the 20 requests due in the first 0.4 s waited >= 100 ms each: 40% of all answers
    assert opened.latency.get_value_at_percentile(65) >= 100_000

    closed = Recorder("closed", loop.time(), 5.0)
    stall["until"] = closed.origin + 0.5
    await closed_loop(server, 1, 1.0, closed, asyncio.Event(), drain_s=2.0)
    # one worker: a single request sat through the stall, then hundreds of quick ones
    assert closed.completed > 50
    assert closed.latency.get_max_value() >= 400_000
    assert closed.latency.get_value_at_percentile(90) < 50_000


async def test_open_loop_drops_past_the_cap_and_counts_every_scheduled_request():
    loop = asyncio.get_running_loop()

    async def hangs() -> Outcome:
        await asyncio.sleep(30)
        return Outcome()

    recorder = Recorder("drops", loop.time(), 1.0)
    await open_loop(hangs, schedule(100.0, 0.2, "constant"), recorder, 5, asyncio.Event(), drain_s=0.05)
    summary = recorder.summary(0.2, loop.time(), 100.0)
    assert summary["scheduled"] == 20 and summary["dropped_by_client"] == 15 and summary["sent"] == 5
    assert summary["codes"] == {"CANCELLED": 5}
    assert summary["scheduled"] == summary["completed"] + summary["dropped_by_client"]
    assert summary["error_rate"] == 1.0 and summary["latency_ms"]["p99"] is None


async def test_a_stop_ends_an_open_loop_early():
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    loop.call_later(0.2, stop.set)

    async def quick() -> Outcome:
        return Outcome(code="UNAVAILABLE")

    recorder = Recorder("stopped", loop.time(), 1.0)
    await open_loop(quick, schedule(50.0, 30.0, "constant"), recorder, 100, stop, drain_s=1.0)
    assert 5 <= recorder.scheduled <= 20 and recorder.codes["UNAVAILABLE"] == recorder.scheduled


def _step(qps: float, p99: float | None, error_rate: float = 0.0, client_limited: bool = False) -> dict:
    return {"offered_qps": qps, "latency_ms": {"p99": p99}, "error_rate": error_rate,
            "client_limited": client_limited, "achieved_send_qps": qps, "send_lag_ms": {"p99": 1.0}}


def test_the_knee_is_the_highest_passing_step_and_two_failures_stop_the_ramp():
    table = [_step(10, 20), _step(20, 30), _step(40, 150), _step(80, 60), _step(160, 90, error_rate=0.05),
             _step(320, None, error_rate=1.0)]
    assert find_knee(table, 100, 0.01) == 80  # 40 failed once, 80 passed again
    assert stop_reason(table[:3], 100, 0.01, patience=2) is None
    assert stop_reason(table[:4], 100, 0.01, patience=2) is None
    assert "2 steps in a row" in stop_reason(table[:6], 100, 0.01, patience=2)
    assert find_knee([_step(10, 200)], 100, 0.01) is None
    limited = [_step(10, 20), _step(20, 20, client_limited=True)]
    assert find_knee(limited, 100, 0.01) == 10 and "client could not generate 20" in stop_reason(limited, 100, 0.01, 2)
    assert default_steps(10, 80) == [10, 20, 40, 80] and parse_steps("5, 10") == [5.0, 10.0]
    with pytest.raises(ValueError):
        parse_steps("0")


def test_an_answer_says_whether_it_was_degraded_which_legs_failed_and_its_stage_times():
    response = search_pb2.SearchResponse(degraded=True, took_ms=12.5, legs=[
        search_pb2.LegStatus(name="bm25", state=search_pb2.LEG_STATE_OK),
        search_pb2.LegStatus(name="vector", state=search_pb2.LEG_STATE_FAILED)])
    response.explain.timings.add(stage="fusion", ms=1.5)
    outcome = outcome_of(response)
    assert outcome.code == "OK" and outcome.degraded and outcome.failed_legs == ("vector",)
    assert dict(outcome.stages_ms) == {"fusion": 1.5, TOOK_STAGE: 12.5}


def _fake_run(name: str, kind: str, origin: float, ms: float, n: int = 40) -> Recorder:
    recorder = Recorder(name, origin, 1.0, command_origin=0.0)
    for i in range(n):
        t = origin + i * 0.05
        recorder.on_scheduled(t)
        recorder.on_sent(t, t)
        outcome = Outcome(code="OK" if i % 10 else "RESOURCE_EXHAUSTED", degraded=i % 7 == 0,
                          failed_legs=("vector",) if i % 7 == 0 else (), stages_ms=(("fusion", 1.0), (TOOK_STAGE, ms)))
        recorder.on_completed(t, t, t + ms / 1000, outcome)
    return recorder


async def test_plots_and_report_from_synthetic_runs(tmp_path):
    runs: list[dict] = []

    async def step(qps: float) -> dict:
        summary = _fake_run(f"fast @ {qps:g} QPS", "ramp-step", 2.0 * len(runs), qps).summary(2.0, 2.0 * len(runs) + 2, qps)
        summary.update(scenario="fast", kind="ramp-step")
        runs.append(summary)
        return summary

    ramp = await run_ramp(step, [10, 20, 40, 80, 160], 100.0, 0.2, 2, asyncio.Event())
    runs[0]["cpu_ms_per_request"] = {"gateway": 3.5, "vector": 12.25}
    assert ramp["knee_qps"] == 80 and len(ramp["table"]) == 5 and ramp["stopped_because"] == "every step ran"
    writes = _fake_run("fast writes", "writes", 4.0, 30).summary(2.0, 6.0, 5.0)
    writes.update(scenario="fast", kind="writes")
    report = {"runs": [*runs, writes], "ramps": {"fast": ramp},
              "mixed": {"fast": {"write_docs_per_s": 5.0, "documents_sent": 10, "documents_deleted": 10,
                                 "comparison": compare(runs[0], runs[1])}},
              "stages_median_ms": {"fast": {"fusion": 1.0, TOOK_STAGE: 20.0}, "bm25": {TOOK_STAGE: 5.0}},
              "rss": {"pids": {"gateway": 1}, "period_s": 1.0,
                      "series": [{"t": t, "rss_mb": {"gateway": 100.0 + t}} for t in range(5)]},
              "interrupted": False, "cpu": {"baseline": None, "headlines": [{"line": "fast (ramp, 5 steps pooled): CPU "
                                                                                     "per answer 15.75 ms"}]}}
    path = write_outputs(report, tmp_path)
    assert sorted(report["plots"]) == ["latency_over_time.png", "latency_vs_load.png", "rss_over_time.png",
                                       "stage_breakdown.png"]
    for name in report["plots"]:
        assert (tmp_path / name).read_bytes()[:8] == PNG_MAGIC
    saved = json.loads(path.read_text())
    assert saved["ramps"]["fast"]["knee_qps"] == 80 and saved["runs"][0]["codes"] == {"OK": 36, "RESOURCE_EXHAUSTED": 4}
    out = io.StringIO()
    print_summary(report, Console(file=out, width=200))
    assert "knee 80" in out.getvalue() and "RESOURCE_EXHAUSTED:4" in out.getvalue()
    cpu_row = next(line for line in out.getvalue().splitlines() if "fast @ 10 QPS" in line and "12.2" in line)
    assert "3.5" in cpu_row and "15.8" in cpu_row  # per process, and their total
    assert out.getvalue().splitlines()[-2:] == ["fast (ramp, 5 steps pooled): CPU per answer 15.75 ms",
                                                "(no baseline CPU: --baseline-from a `hybridsearch speed --json-out` "
                                                "file, or --baseline-cpu-ms)"]


def test_a_burst_run_is_reported(tmp_path):
    summary = _fake_run("fast", "burst", 0.0, 20.0).summary(2.0, 2.0, 20.0)
    summary.update(scenario="fast", kind="burst", burst_size=40, bursts=1)
    report = {"runs": [summary], "ramps": {}, "mixed": {}, "stages_median_ms": {}, "rss": None,
              "interrupted": False}
    write_outputs(report, tmp_path)
    assert "latency_over_time.png" in report["plots"]
    out = io.StringIO()
    print_summary(report, Console(file=out, width=200))
    assert "1 x 40 at once" in out.getvalue() and "RESOURCE_EXHAUSTED:4" in out.getvalue()
