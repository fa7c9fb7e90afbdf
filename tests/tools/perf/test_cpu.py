"""CPU per answer without a stack: the ledger's arithmetic, the headline figure against the baseline, the
CPU clocks of processes, the baseline's own CPU split, and `speed`'s CPU columns from a fake gateway whose
processes' CPU clocks the test moves itself."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np
import pytest

from hybridsearch.tools.perf.baseline import BaselineDocument, LibraryBaseline
from hybridsearch.config.settings import Settings
from hybridsearch.tools.perf.cpu import (BaselineCpu, CpuFigure, CpuLedger, embedded_estimate, ordered, pooled_ms,
                                         query_cache_on, settled)
from hybridsearch.tools.perf.load.report import cpu_headlines
from hybridsearch.tools.perf.load.session import LoadPlan, Session
from hybridsearch.tools.perf.procs import _service_of, cpu_ns, cpu_ns_of
from hybridsearch.tools.perf.speed import (BASELINE, SPEED_MODES, cpu_figures, cpu_markdown, default_embeds,
                                           embedded_texts, run_speed, to_markdown)
from hybridsearch.v1 import common_pb2, search_pb2


def test_contiguous_readings_charge_every_nanosecond_to_one_column():
    ledger = CpuLedger()
    readings = [{"gateway": 0, "bm25": 0}, {"gateway": 2_000_000, "bm25": 1_000_000},
                {"gateway": 5_000_000, "bm25": 1_000_000, "vector": 9}, {"gateway": 6_000_000, "bm25": 3_000_000}]
    mark = readings[0]
    for column, reading in zip(["fast", "bm25", "fast"], readings[1:]):
        mark = ledger.charge(column, mark, reading)
    assert mark == readings[-1]
    assert ledger.per_answer_ms("fast") == {"gateway": 1.5, "bm25": 1.5}  # (2 + 1) / 2 and (1 + 2) / 2
    assert ledger.per_answer_ms("bm25") == {"gateway": 3.0, "bm25": 0.0}  # vector: not in the earlier reading
    assert ledger.per_answer_ms("nothing") == {}
    # a process that restarted (its clock went back) is charged nothing, never a negative figure
    assert ledger.charge("x", {"gateway": 10}, {"gateway": 3}) and ledger.per_answer_ms("x") == {"gateway": 0.0}


def test_a_reading_waits_for_an_answers_trailing_work():
    # the gateway spends 1 ms, then 0.5 ms, then 2 us per 2 ms window: quiet (< 5% of a core) at the third
    spent = iter([0, 1_000_000, 1_500_000, 1_502_000, 1_504_000])
    naps: list[float] = []
    reading = settled(lambda: {"gateway": next(spent), "bm25": 7}, sleep=naps.append)
    assert reading == {"gateway": 1_502_000, "bm25": 7} and naps == [0.002] * 3
    busy = iter(range(0, 10**12, 10**6))  # never quiet: the last reading after the limit
    naps.clear()
    assert settled(lambda: {"vector": next(busy)}, limit_s=0.01, sleep=naps.append) == {"vector": 5_000_000}
    assert len(naps) == 5


def test_process_names_keep_the_stack_order():
    assert ordered(["redis", "pid 7", "vector", "gateway", "vector"]) == ["gateway", "vector", "redis", "pid 7"]


def test_the_headline_against_the_baseline_and_outside_the_embedding():
    figure = CpuFigure({"gateway": 3.9, "bm25": 3.9, "vector": 12.2, "fusion": 2.4}, baseline_ms=10.0, embed_ms=7.0,
                       baseline_embed_ms=7.0)
    assert figure.total_ms == 22.4 and figure.ratio == 2.24
    assert figure.outside_embedding_ms == 15.4 and figure.baseline_outside_embedding_ms == 3.0
    assert figure.outside_embedding_ratio == 5.133
    line = figure.line("fast (closed loop, 4 workers)")
    assert line.startswith("fast (closed loop, 4 workers): CPU per answer 22.40 ms (gateway 3.90 + bm25 3.90")
    assert "= 2.24x the in-process baseline's 10.00 ms" in line and "outside the query embedding 15.40 ms = 5.13x" in line
    alone = CpuFigure({"gateway": 1.0})
    assert alone.ratio is None and alone.outside_embedding_ms is None
    assert alone.line("bm25") == "bm25: CPU per answer 1.00 ms (gateway 1.00)"
    assert set(figure.as_dict()) >= {"per_process_ms", "total_ms", "ratio", "outside_embedding_ratio"}


def test_a_ramps_steps_pool_by_their_answers():
    steps = [{"ok": 100, "cpu_ms_per_answer": {"vector": 10.0, "gateway": 4.0}},
             {"ok": 300, "cpu_ms_per_answer": {"gateway": 2.0, "vector": 14.0}},
             {"ok": 0, "cpu_ms_per_answer": {}}]
    assert pooled_ms(steps) == {"gateway": 2.5, "vector": 13.0}
    assert pooled_ms([]) == {}


def test_the_baseline_figure_comes_from_a_speed_json(tmp_path):
    path = tmp_path / "speed.json"
    path.write_text(json.dumps({"cpu": {"baseline": {"thread_ms": 10.0, "embed_ms": 7.0, "process_ms": 10.4}}}))
    base = BaselineCpu.from_speed_json(path)
    assert base == BaselineCpu(10.0, 7.0, str(path))
    assert base.figure({"gateway": 4.0, "vector": 11.0}, 1).outside_embedding_ms == 8.0
    assert base.figure({"gateway": 4.0}, None).outside_embedding_ms is None  # BALANCED: variants unknown here
    (tmp_path / "old.json").write_text(json.dumps({"columns": {}}))
    with pytest.raises(ValueError, match="cpu.baseline"):
        BaselineCpu.from_speed_json(tmp_path / "old.json")


def test_a_process_cpu_clock_in_nanoseconds(tmp_path):
    before = cpu_ns(os.getpid())
    burn_until = time.thread_time() + 0.05
    while time.thread_time() < burn_until:
        pass
    spent = cpu_ns(os.getpid()) - before
    assert 0.045e9 < spent < 1e9  # whole-process clock: this thread's 50 ms and whatever else ran
    assert cpu_ns(2**22 + 7) is None and cpu_ns_of({"gone": 2**22 + 7}) == {}
    fake = tmp_path / "42"
    fake.mkdir()
    (fake / "stat").write_text("42 (python3 x) S 1 " + " ".join(["0"] * 9) + " 250 50 0")  # utime 250, stime 50
    assert cpu_ns(42, proc=tmp_path) == 300 * 1_000_000_000 // os.sysconf("SC_CLK_TCK")  # ticks, where no clock


def test_the_llm_server_is_a_stack_process():
    assert _service_of(["/x/.venv/bin/python3.11", "-m", "llama_cpp.server", "--model", "m.gguf"]) == "llm"


class BurningEmbedder:
    """A stand-in query embedder: a unit vector per text after `ms` of this thread's CPU."""

    dim = 4

    def __init__(self, ms: float) -> None:
        self.ms = ms

    def embed(self, texts: list[str]) -> np.ndarray:
        until = time.thread_time() + self.ms / 1000
        while time.thread_time() < until:
            pass
        return np.tile(np.eye(self.dim, dtype=np.float32)[0], (len(texts), 1))


def small_baseline(embed_ms: float = 3.0) -> LibraryBaseline:
    documents = [BaselineDocument(f"d{i}", f"title {i}", text) for i, text in enumerate(
        ["reciprocal rank fusion of ranked lists", "bm25 scores terms by frequency", "vectors from a small model",
         "fusion weights and variants", "chunking documents at ingestion"])]
    vectors = np.eye(len(documents), BurningEmbedder.dim, dtype=np.float32)
    return LibraryBaseline(documents, vectors, BurningEmbedder(embed_ms))


def test_the_baselines_cpu_is_its_threads_and_its_embedding_is_measured_apart():
    call = small_baseline(3.0).measured_search("rank fusion", top_k=3)
    assert call.hits and call.hits[0] == "d0"
    assert 2.9 <= call.embed_cpu_ms < call.thread_cpu_ms <= call.process_cpu_ms + 0.5
    assert call.wall_ms >= call.embed_cpu_ms


class FakeGateway:
    """Answers every search at once; the 'stack processes' spend a fixed CPU per mode on each answer."""

    COST_NS = {common_pb2.EFFORT_FAST: {"gateway": 2_000_000, "vector": 6_000_000},
               common_pb2.EFFORT_BALANCED: {"gateway": 3_000_000, "vector": 15_000_000, "expansion": 1_000_000}}

    def __init__(self) -> None:
        self.clock = {"gateway": 0, "vector": 0, "expansion": 0}

    def read(self) -> dict[str, int]:
        self.clock["gateway"] += 1_000  # the background: 1 us of gateway CPU between any two readings
        return dict(self.clock)

    def search(self, request: search_pb2.SearchRequest) -> search_pb2.SearchResponse:
        cost = self.COST_NS[request.effort]
        if request.mode == common_pb2.RETRIEVAL_MODE_BM25:
            cost = {"gateway": 1_000_000}
        for name, ns in cost.items():
            self.clock[name] += ns
        response = search_pb2.SearchResponse(took_ms=1.0)
        response.hits.add(doc_id="d0")
        if request.explain and request.effort == common_pb2.EFFORT_BALANCED:
            response.explain.semantic_variants.extend(["variant one", "variant two"])
        return response


def test_speed_charges_each_mode_its_own_cpu_and_sets_it_against_the_baseline():
    gateway, baseline = FakeGateway(), small_baseline(2.0)
    queries, qrels = {"q1": "rank fusion", "q2": "bm25 terms", "q3": "small model"}, {"q1": {"d0": 1}, "q2": {"d1": 1}, "q3": {"d2": 1}}
    modes = ["bm25", "fast", "balanced"]
    result = run_speed(gateway, baseline, queries, qrels, "c", modes, top_k=3, warmup=1, cpu=gateway.read)
    per_answer = result["cpu"]["per_answer_ms"]
    assert per_answer["bm25"] == {"gateway": 1.001, "vector": 0.0, "expansion": 0.0}
    assert per_answer["fast"] == {"gateway": 2.001, "vector": 6.0, "expansion": 0.0}
    assert per_answer["balanced"] == {"gateway": 3.001, "vector": 15.0, "expansion": 1.0}
    assert result["cpu"]["stack_during_baseline_ms"] == {"gateway": 0.001, "vector": 0.0, "expansion": 0.0}
    base = result["cpu"]["baseline"]
    assert base["embed_ms"] >= 2.0 and base["thread_ms"] > base["embed_ms"]

    balanced = gateway.search(SPEED_MODES["balanced"].request("q", "c", 3, explain=True))
    embeds = {**default_embeds(modes), "balanced": float(embedded_texts(balanced, SPEED_MODES["balanced"]))}
    assert embeds == {"bm25": 0, "fast": 1, "balanced": 3.0}  # BALANCED: the query and its two semantic variants
    cpu_figures(result, embeds)
    fast = result["columns"]["fast"]["cpu"]
    assert fast["total_ms"] == 8.001 and fast["ratio"] == round(8.001 / base["thread_ms"], 3)
    assert fast["embed_ms"] == base["embed_ms"] and fast["outside_embedding_ms"] == round(8.001 - base["embed_ms"], 3)
    assert result["columns"]["balanced"]["cpu"]["embed_ms"] == round(3 * base["embed_ms"], 3)
    assert result["columns"][BASELINE]["cpu"]["ratio"] == 1.0

    table = cpu_markdown(result)
    header, _, baseline_row, bm25_row, *_ = table.splitlines()
    assert header == ("| path | gateway | vector | expansion | CPU ms / answer | / baseline | query embedding "
                      "| outside it | / baseline |")
    assert baseline_row.startswith("| baseline |  |  |  | ") and "| 1.00x |" in baseline_row
    assert bm25_row.startswith("| bm25 | 1.00 | 0.00 | 0.00 | 1.00 |") and "| 0.00 | 1.00 |" in bm25_row
    assert "stack CPU while the baseline ran" in table and "time.thread_time" in table
    assert to_markdown(result).splitlines()[0].startswith("| path | p50 ms |")


def test_with_the_query_cache_on_only_a_mode_that_embeds_nothing_keeps_its_split():
    assert query_cache_on(Settings()) and not query_cache_on(Settings(vector={"query_cache_size": 0,
                                                                              "query_cache_redis": False}))
    assert query_cache_on(Settings(vector={"query_cache_size": 0}))  # the Redis level alone
    assert [embedded_estimate(n, True) for n in (0, 1, 3.0, None)] == [0, None, None, None]
    assert [embedded_estimate(n, False) for n in (0, 1, 3.0, None)] == [0, 1, 3.0, None]
    gateway = FakeGateway()
    result = run_speed(gateway, small_baseline(1.0), {"q1": "fusion"}, {"q1": {"d0": 1}}, "c", ["bm25", "fast"],
                       warmup=0, cpu=gateway.read)
    cpu_figures(result, default_embeds(["bm25", "fast"]), query_cache=True)
    assert result["cpu"]["query_cache"] is True
    assert result["columns"]["bm25"]["cpu"]["outside_embedding_ms"] == result["columns"]["bm25"]["cpu"]["total_ms"]
    assert result["columns"]["fast"]["cpu"]["embed_ms"] is None and result["columns"]["fast"]["cpu"]["ratio"] > 0
    table = cpu_markdown(result)
    assert "query vector cache is on" in table and "QUERY_CACHE_SIZE=0" in table


def test_speed_without_stack_processes_still_reports_the_baselines_cpu():
    result = run_speed(FakeGateway(), small_baseline(1.0), {"q1": "fusion"}, {"q1": {"d0": 1}}, "c", ["fast"],
                       warmup=0)
    assert result["cpu"]["per_answer_ms"] == {} and result["cpu"]["baseline"]["thread_ms"] > 0
    cpu_figures(result, default_embeds(["fast"]))
    assert "fast" not in [r for r in result["columns"] if "cpu" in result["columns"][r]]
    assert "no stack CPU was measured" in cpu_markdown(result)


def test_loadtest_headlines_per_scenario_with_the_baseline():
    plan = LoadPlan(mode="ramp", address="127.0.0.1:1", collection="c", queries=["q"], scenarios=["fast", "balanced"],
                    baseline_cpu=BaselineCpu(10.0, 7.0))
    session = Session(plan, pool=None, stop=None, origin=0.0)
    session.runs = [
        {"name": "fast @ 10 QPS", "scenario": "fast", "kind": "ramp-step", "ok": 100,
         "cpu_ms_per_answer": {"gateway": 4.0, "vector": 12.0}},
        {"name": "fast @ 20 QPS", "scenario": "fast", "kind": "ramp-step", "ok": 300,
         "cpu_ms_per_answer": {"gateway": 4.0, "vector": 12.0, "bm25": 4.0}},
        {"name": "balanced @ 10 QPS", "scenario": "balanced", "kind": "ramp-step", "ok": 50,
         "cpu_ms_per_answer": {"gateway": 6.0, "vector": 25.0}},
    ]
    fast, balanced = session.cpu_headlines()
    assert fast["label"] == "fast (ramp, 2 steps pooled)" and fast["answers"] == 400
    assert fast["per_process_ms"] == {"gateway": 4.0, "bm25": 3.0, "vector": 12.0} and fast["total_ms"] == 19.0
    assert fast["ratio"] == 1.9 and fast["outside_embedding_ms"] == 12.0 and fast["outside_embedding_ratio"] == 4.0
    assert balanced["ratio"] == 3.1 and balanced["outside_embedding_ms"] is None
    results = session.results()
    assert results["cpu"]["baseline"] == {"thread_ms": 10.0, "embed_ms": 7.0, "source": "given"}
    lines = cpu_headlines(results)
    assert lines[0] == fast["line"] and lines[1].startswith("balanced (ramp, 1 steps pooled): CPU per answer 31.00 ms")
    closed = Session(LoadPlan(mode="closed", address="127.0.0.1:1", collection="c", queries=["q"], workers=4),
                     pool=None, stop=None, origin=0.0)
    closed.runs = [{"name": "fast", "scenario": "fast", "kind": "closed", "ok": 10, "cpu_ms_per_answer": {"gateway": 1.0}}]
    (headline,) = closed.cpu_headlines()
    assert headline["label"] == "fast (closed loop, 4 workers)" and headline["ratio"] is None
    assert not headline["query_cache"] and "cache" not in headline["line"]
    cached = Session(LoadPlan(mode="closed", address="127.0.0.1:1", collection="c", queries=["q"], query_cache=True,
                              baseline_cpu=BaselineCpu(10.0, 7.0)), pool=None, stop=None, origin=0.0)
    cached.runs = closed.runs
    (headline_cached,) = cached.cpu_headlines()
    assert headline_cached["ratio"] == 0.1 and headline_cached["outside_embedding_ms"] is None
    assert headline_cached["line"].endswith("; query vector cache on (a cycled query is embedded once)")
    assert cpu_headlines(closed.results()) == [headline["line"], "(no baseline CPU: --baseline-from a `hybridsearch "
                                               "speed --json-out` file, or --baseline-cpu-ms)"]


def test_a_profile_needs_one_closed_run_of_one_scenario(tmp_path: Path):
    from hybridsearch.tools.perf.flame import ProfileSpec

    spec = ProfileSpec(tmp_path, "/bin/true")
    good = LoadPlan(mode="closed", address="127.0.0.1:1", collection="c", queries=["q"], profile=spec,
                    cpu_pids={"gateway": 1})
    good.check()
    for change in ({"mode": "open"}, {"scenarios": ["fast", "bm25"]}, {"cpu_pids": {}}):
        with pytest.raises(ValueError, match="--profile"):
            LoadPlan(**{**good.__dict__, **change}).check()
