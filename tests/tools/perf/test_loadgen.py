"""`hybridsearch loadtest` against the real stack over loopback gRPC: that the generator works and
counts what it should (never how fast anything is). Short runs at low rates: open and closed loop, a
two-step ramp, queries while writing, errors counted by status code, Ctrl-C."""

from __future__ import annotations

import json
import os
import signal
import threading

import pytest
from typer.testing import CliRunner

from hybridsearch.cli import SAMPLE_CORPUS, app
from hybridsearch.corpus import read_folder
from hybridsearch.tools.perf.load.recorder import TOOK_STAGE
from stacks import client_environment

pytestmark = pytest.mark.stack
COLLECTION = "perf-load"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
RUN_KEYS = {"name", "scenario", "kind", "offered_qps", "scheduled", "sent", "dropped_by_client", "completed", "ok",
            "errors", "codes", "error_rate", "degraded", "failed_legs", "achieved_send_qps", "client_limited",
            "throughput_qps", "goodput_qps", "latency_ms", "service_time_ms", "send_lag_ms", "stages_median_ms",
            "timeseries", "latency_hdr"}


@pytest.fixture(scope="module")
def indexed(gateway):
    docs = list(read_folder(SAMPLE_CORPUS))
    assert gateway.index(COLLECTION, docs).documents_received == len(docs)
    return len(docs)


@pytest.fixture(scope="module")
def queries(tmp_path_factory):
    folder = tmp_path_factory.mktemp("queries")
    texts = ["reciprocal rank fusion", "how are documents chunked", "cross-encoder reranking", "bm25 k1 and b"]
    (folder / "queries.jsonl").write_text("".join(json.dumps({"_id": str(i), "text": t}) + "\n"
                                                  for i, t in enumerate(texts)))
    return folder


def loadtest(stack, queries, out, *args: str) -> dict:
    """Runs the command; returns the JSON report it wrote."""
    defaults = ["--address", stack.settings.endpoints.addr("gateway"), "--queries-from", str(queries),
                "--out", str(out), "--warmup", "2", "--collection", COLLECTION]
    with client_environment(stack):
        result = CliRunner().invoke(app, ["loadtest", *defaults, *args])  # the last of a repeated option wins
    assert result.exit_code == 0, (result.output, result.exception)
    return json.loads((out / "loadtest.json").read_text())


def counted(run: dict) -> None:
    """Every scheduled request ends up counted once: answered (OK or by code) or dropped by the client."""
    assert RUN_KEYS <= set(run)
    assert run["scheduled"] == run["completed"] + run["dropped_by_client"]
    assert run["completed"] == sum(run["codes"].values())
    assert sum(row["offered"] for row in run["timeseries"]) == run["scheduled"]
    assert sum(row["completed"] for row in run["timeseries"]) == run["completed"]


def pngs(out, report: dict, expected: set[str]) -> None:
    assert set(report["plots"]) == expected
    for name in expected:
        assert (out / name).read_bytes()[:8] == PNG_MAGIC


def test_open_loop_counts_every_scheduled_request(stack, indexed, queries, tmp_path):
    report = loadtest(stack, queries, tmp_path, "open", "--rate", "20", "--duration", "2", "--arrivals", "constant",
                      "--stage-timings", "--rss")
    assert {"command", "started_at", "parameters", "runs", "ramps", "mixed", "stages_median_ms", "rss",
            "interrupted", "plots"} <= set(report)
    assert report["parameters"]["rate"] == 20.0 and not report["interrupted"]
    (run,) = report["runs"]
    counted(run)
    assert run["scheduled"] == 40  # constant arrivals: 20/s for 2 s
    assert run["ok"] > 0 and run["latency_ms"]["p50"] > 0 and run["latency_ms"]["p99"] >= run["latency_ms"]["p50"]
    assert run["service_time_ms"]["p50"] <= run["latency_ms"]["p99.9"]
    stages = report["stages_median_ms"]["fast"]
    assert TOOK_STAGE in stages and "fusion" in stages  # explain's timings with --stage-timings
    assert report["rss"]["series"] and report["rss"]["pids"]
    pngs(tmp_path, report, {"latency_over_time.png", "stage_breakdown.png", "rss_over_time.png"})


def test_closed_loop(stack, indexed, queries, tmp_path):
    report = loadtest(stack, queries, tmp_path, "closed", "--workers", "2", "--duration", "2", "-s", "bm25",
                      "--baseline-cpu-ms", "10")
    (run,) = report["runs"]
    counted(run)
    assert run["kind"] == "closed" and run["scenario"] == "bm25" and run["ok"] > 0 and run["dropped_by_client"] == 0
    # CPU per answer of this stack's processes (found by its ports), and the headline against the baseline's
    cpu = run["cpu_ms_per_answer"]
    assert cpu["gateway"] > 0 and cpu["bm25"] > 0 and set(cpu) <= set(report["cpu"]["processes"])
    (headline,) = report["cpu"]["headlines"]
    assert headline["label"] == "bm25 (closed loop, 2 workers)" and headline["total_ms"] >= cpu["gateway"] + cpu["bm25"]
    assert headline["ratio"] == round(headline["total_ms"] / 10, 3) and headline["outside_embedding_ms"] is None


def test_two_step_ramp(stack, indexed, queries, tmp_path):
    report = loadtest(stack, queries, tmp_path, "ramp", "--steps", "4,8", "--step-seconds", "1.5")
    ramp = report["ramps"]["fast"]
    assert len(ramp["table"]) == 2 or "client" in ramp["stopped_because"]
    assert {"knee_qps", "stopped_because", "p99_limit_ms"} <= set(ramp)
    assert [r["offered_qps"] for r in ramp["table"]] == [4.0, 8.0][:len(ramp["table"])]
    for run in report["runs"]:
        counted(run)
    pngs(tmp_path, report, {"latency_vs_load.png", "latency_over_time.png", "stage_breakdown.png"})


def test_queries_while_writing_then_the_writes_are_deleted(stack, gateway, indexed, queries, tmp_path):
    report = loadtest(stack, queries, tmp_path, "mixed", "--rate", "10", "--duration", "2", "--write-rate", "5")
    kinds = {run["kind"]: run for run in report["runs"]}
    assert set(kinds) == {"no-writes", "with-writes", "writes"}
    for run in kinds.values():
        counted(run)
    writes = kinds["writes"]
    assert writes["scheduled"] > 0 and writes["ok"] > 0 and writes["latency_ms"]["p50"] > 0
    mixed = report["mixed"]["fast"]
    assert set(mixed["comparison"]) >= {"p50_ms", "p99_ms", "error_rate", "goodput_qps"}
    assert mixed["documents_sent"] == writes["sent"] and writes["ok"] <= mixed["documents_deleted"] <= writes["sent"]
    assert all(store.documents == indexed for store in gateway.stats(COLLECTION).stores)


def test_errors_are_counted_by_status_code(stack, indexed, queries, tmp_path):
    invalid = loadtest(stack, queries, tmp_path / "invalid", "open", "--rate", "10", "--duration", "1",
                       "--arrivals", "constant", "--collection", "Not A Collection!")
    (run,) = invalid["runs"]
    counted(run)
    assert run["codes"] == {"INVALID_ARGUMENT": 10} and run["error_rate"] == 1.0 and run["goodput_qps"] == 0
    late = loadtest(stack, queries, tmp_path / "late", "open", "--rate", "10", "--duration", "1", "--deadline-ms", "1")
    (run,) = late["runs"]
    counted(run)
    assert run["codes"].get("DEADLINE_EXCEEDED", 0) > 0


def test_ctrl_c_stops_the_run_and_still_writes_the_report(stack, indexed, queries, tmp_path):
    timer = threading.Timer(2.0, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    try:
        report = loadtest(stack, queries, tmp_path, "open", "--rate", "10", "--duration", "60", "--warmup", "0")
    finally:
        timer.cancel()
    (run,) = report["runs"]
    assert report["interrupted"] and 0 < run["scheduled"] < 60 * 10 / 2
    counted(run)


def test_a_burst_is_sent_at_once(stack, indexed, queries, tmp_path):
    report = loadtest(stack, queries, tmp_path, "burst", "--burst-size", "12", "--bursts", "2", "--burst-gap", "1",
                      "--deadline-ms", "5000")
    (run,) = report["runs"]
    counted(run)
    assert run["kind"] == "burst" and run["scheduled"] == 24 and run["burst_size"] == 12
    assert set(run["codes"]) <= {"OK", "RESOURCE_EXHAUSTED"} and run["ok"] > 0
