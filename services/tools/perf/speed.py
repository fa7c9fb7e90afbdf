"""`hybridsearch speed DIR`: sequential latency through the gateway against the in-process baseline.

Every judged query of a BEIR folder runs, one at a time, through the in-process library baseline
(perf.baseline) and through the gateway in each mode, interleaved query by query, so a machine that
slows down mid-run slows every column alike and the ratios stay honest. Each column also gets its
nDCG@10 from the same answers. A second pass with explain on collects the gateway's stage timings
(legs as the gateway saw them, the legs' own engine and embedding time, fusion, rerank) for the
per-hop budget; it is separate because explain makes answers larger.

CPU per answer beside latency: the CPU clock of every stack process (perf.procs) is read between one
call and the next, once the processes have gone quiet (cpu.settled: an answer's trailing work done), so
each mode's column is charged the CPU the processes spent on its answers (every process, each answer on
its own; the readings are contiguous, so nothing is left uncounted, and the stack's CPU during the
baseline's calls is reported as the background). The
baseline's own CPU is its thread's CPU time (perf.baseline). The query embedding's share: the baseline's
is measured (thread CPU around its embed call); the stack's is estimated as the query texts the vector
leg embeds per answer (1 in vector and FAST; BALANCED's semantic variants as explain lists them) times the
baseline's embedding CPU per text: the same model, the same text, one onnxruntime thread in both. That
count is a fresh query's: with the stack's query vector cache on, a mode that finds the query's vector
cached (every mode after the first to embed it here, and the warm-up's queries) embeds nothing, so the
split is left out and the columns are the cached stack's (`cpu.query_cache`); start the stack with the
cache off (cpu.QUERY_CACHE_OFF_ENV) for fresh-query figures.

Several collections (`--collections`, e.g. a plain and a sealed copy of one corpus): every mode runs on
each, a column per mode and collection (`fast@scifact-sealed`), the collections' order flipped from one
query to the next, so neither always runs first (docs/perf/sealed-cost.sh).
"""

from __future__ import annotations

import statistics
import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from ranx import Qrels, Run, evaluate

from hybridsearch.client import GatewayClient
from hybridsearch.tools.perf.baseline import BaselineCall, LibraryBaseline
from hybridsearch.tools.perf.cpu import (QUERY_CACHE_OFF_ENV, QUERY_EMBEDS, CpuFigure, CpuLedger, CpuProbe,
                                         embedded_estimate, ordered)
from hybridsearch.v1 import common_pb2, search_pb2

BASELINE = "baseline"


@dataclass(frozen=True)
class SpeedMode:
    mode: int
    effort: int

    def request(self, query: str, collection: str, top_k: int, explain: bool = False) -> search_pb2.SearchRequest:
        return search_pb2.SearchRequest(query=query, collection=collection, top_k=top_k, mode=self.mode,
                                        effort=self.effort, explain=explain)


SPEED_MODES: dict[str, SpeedMode] = {
    "bm25": SpeedMode(common_pb2.RETRIEVAL_MODE_BM25, common_pb2.EFFORT_FAST),
    "vector": SpeedMode(common_pb2.RETRIEVAL_MODE_VECTOR, common_pb2.EFFORT_FAST),
    "fast": SpeedMode(common_pb2.RETRIEVAL_MODE_HYBRID, common_pb2.EFFORT_FAST),
    "balanced": SpeedMode(common_pb2.RETRIEVAL_MODE_HYBRID, common_pb2.EFFORT_BALANCED),
}


COLUMN_SEP = "@"  # a column of several collections' run: MODE@COLLECTION


def speed_columns(modes: list[str], collections: Sequence[str]) -> list[str]:
    """The run's columns: the modes themselves for one collection; MODE@COLLECTION for several."""
    if len(collections) <= 1:
        return list(modes)
    return [f"{mode}{COLUMN_SEP}{collection}" for mode in modes for collection in collections]


def column_request(column: str, query: str, collection: str, top_k: int,
                   explain: bool = False) -> search_pb2.SearchRequest:
    """The request of one column: its mode, on its own collection (MODE@COLLECTION) or `collection`."""
    mode, _, own = column.partition(COLUMN_SEP)
    return SPEED_MODES[mode].request(query, own or collection, top_k, explain)


def query_order(columns: list[str], index: int) -> list[str]:
    """The columns in the order the `index`th query runs them: each mode's collections reversed every other
    query (a collection that always ran second would find warmer caches)."""
    if index % 2 == 0 or COLUMN_SEP not in "".join(columns):
        return columns
    by_mode: dict[str, list[str]] = defaultdict(list)
    for c in columns:
        by_mode[c.partition(COLUMN_SEP)[0]].append(c)
    return [c for group in by_mode.values() for c in reversed(group)]


def summarise(latencies: list[float]) -> dict[str, float]:
    values = np.asarray(latencies)
    return {f"p{q}_ms": round(float(np.percentile(values, q)), 2) for q in (50, 95, 99)}


def _ranked_run(doc_ids: list[str]) -> dict[str, float]:
    # ranx wants strictly ordered scores: rank-derived ones keep the answer's order.
    return {d: float(len(doc_ids) - i) for i, d in enumerate(doc_ids)} or {"__no_hit__": 0.0}


def run_speed(client: GatewayClient, baseline: LibraryBaseline, queries: dict[str, str], qrels: dict,
              collection: str, modes: list[str], top_k: int = 10, warmup: int = 20, progress=None,
              cpu: CpuProbe | None = None) -> dict:
    """Latency percentiles, nDCG@10 and the p50 ratio to the baseline for the baseline and each mode (or
    column, `speed_columns`); with `cpu` (a reading of the stack processes' CPU clocks) the CPU per answer of
    each too (`result["cpu"]`, which always has the baseline's; the figures against the baseline's come with
    `cpu_figures`)."""
    columns = [BASELINE, *modes]
    latencies: dict[str, list[float]] = defaultdict(list)
    hops: dict[str, list[float]] = defaultdict(list)  # client-observed minus the gateway's own took_ms
    runs: dict[str, dict[str, dict[str, float]]] = defaultdict(dict)
    ledger = CpuLedger()
    calls: list[BaselineCall] = []
    texts = list(queries.values())
    for text in texts[:warmup]:  # untimed: load models, open collections, fill connection pools
        baseline.search(text, top_k)
        for name in modes:
            client.search(column_request(name, text, collection, top_k))
    mark = cpu() if cpu else {}
    for index, (qid, text) in enumerate(queries.items()):
        call = baseline.measured_search(text, top_k)
        calls.append(call)
        latencies[BASELINE].append(call.wall_ms)
        runs[BASELINE][qid] = _ranked_run(call.hits)
        if cpu:  # the stack's CPU while the baseline ran: background and trailing work
            mark = ledger.charge(BASELINE, mark, cpu())
        for name in query_order(modes, index):
            started = time.perf_counter()
            response = client.search(column_request(name, text, collection, top_k))
            elapsed = (time.perf_counter() - started) * 1000
            if cpu:
                mark = ledger.charge(name, mark, cpu())
            latencies[name].append(elapsed)
            hops[name].append(elapsed - response.took_ms)
            runs[name][qid] = _ranked_run([h.doc_id for h in response.hits])
        if progress:
            progress()
    base_p50 = statistics.median(latencies[BASELINE])
    out: dict[str, dict] = {}
    for name in columns:
        row = summarise(latencies[name])
        row["ndcg@10"] = round(float(evaluate(Qrels(qrels), Run(runs[name]), "ndcg@10")), 4)
        row["ratio_p50"] = round(row["p50_ms"] / base_p50, 3)
        if name in hops:
            row["client_hop_p50_ms"] = round(statistics.median(hops[name]), 2)
        out[name] = row
    # Without `cpu` (no stack process found) the baseline's CPU alone; ledger columns are empty then.
    per_answer = {name: ledger.per_answer_ms(name) for name in modes if ledger.answers[name]}
    return {"queries": len(queries), "top_k": top_k, "columns": out,
            "cpu": {"baseline": baseline_cpu(calls), "stack_during_baseline_ms": ledger.per_answer_ms(BASELINE),
                    "per_answer_ms": per_answer}}


def baseline_cpu(calls: list[BaselineCall]) -> dict[str, float]:
    """The baseline's mean CPU ms per query: its thread's (the figure), the embedding's part, the process's."""
    n = max(len(calls), 1)
    return {"thread_ms": round(sum(c.thread_cpu_ms for c in calls) / n, 3),
            "embed_ms": round(sum(c.embed_cpu_ms for c in calls) / n, 3),
            "process_ms": round(sum(c.process_cpu_ms for c in calls) / n, 3)}


def default_embeds(modes: list[str]) -> dict[str, float | None]:
    """Query texts embedded per answer as far as the mode alone tells (None: expansion's variants decide)."""
    return {name: QUERY_EMBEDS.get(name.partition(COLUMN_SEP)[0]) for name in modes}


def cpu_figures(result: dict, embeds: Mapping[str, float | None], query_cache: bool = False) -> None:
    """Each column's `cpu`: CPU ms per answer per process, the sum, the sum against the baseline's and, where
    the texts embedded per answer are known (`embedded_estimate`: not with the stack's query vector cache
    on), the same outside the query embedding (see the module's doc)."""
    result["cpu"]["query_cache"] = query_cache
    embeds = {name: embedded_estimate(texts, query_cache) for name, texts in embeds.items()}
    base = result["cpu"]["baseline"]
    result["columns"][BASELINE]["cpu"] = CpuFigure(
        {BASELINE: base["thread_ms"]}, base["thread_ms"], base["embed_ms"], base["embed_ms"]).as_dict()
    for name, per_process in result["cpu"]["per_answer_ms"].items():
        texts = embeds.get(name)
        embed = None if texts is None else round(texts * base["embed_ms"], 3)
        figure = CpuFigure(per_process, base["thread_ms"], embed, base["embed_ms"])
        result["columns"][name]["cpu"] = {**figure.as_dict(), "embedded_texts_per_answer": texts}


def embedded_texts(response: search_pb2.SearchResponse, mode: SpeedMode) -> int:
    """Query texts the vector leg embedded for one answer (explain on): the query and its semantic variants."""
    if mode.mode == common_pb2.RETRIEVAL_MODE_BM25:
        return 0
    explain = response.explain
    return 1 + len(explain.semantic_variants) + (1 if explain.hyde else 0)


def stage_budget(client: GatewayClient, queries: dict[str, str], collection: str, modes: list[str],
                 top_k: int = 10) -> tuple[dict[str, dict[str, float]], dict[str, float]]:
    """Median milliseconds of every stage the gateway reports (explain on), per mode; and the mean number of
    query texts embedded per answer, per mode (`embedded_texts`)."""
    budget: dict[str, dict[str, float]] = {}
    embeds: dict[str, float] = {}
    for name in modes:
        stages: dict[str, list[float]] = defaultdict(list)
        embedded: list[int] = []
        for text in queries.values():
            response = client.search(column_request(name, text, collection, top_k, explain=True))
            for timing in response.explain.timings:
                stages[timing.stage].append(timing.ms)
            stages["gateway total (took_ms)"].append(response.took_ms)
            embedded.append(embedded_texts(response, SPEED_MODES[name.partition(COLUMN_SEP)[0]]))
        budget[name] = {stage: round(statistics.median(values), 2) for stage, values in stages.items()}
        embeds[name] = round(statistics.fmean(embedded), 3) if embedded else 0.0
    return budget, embeds


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    return "\n".join(f"| {' | '.join(cells)} |" for cells in [header, ["---"] * len(header), *rows])


def _cell(value: float | None, unit: str = "") -> str:
    return "" if value is None else f"{value:.2f}{unit}"


def to_markdown(result: dict) -> str:
    header = ["path", "p50 ms", "p95 ms", "p99 ms", "p50 / baseline", "nDCG@10"]
    rows = [[name, f"{row['p50_ms']:.2f}", f"{row['p95_ms']:.2f}", f"{row['p99_ms']:.2f}",
             f"{row['ratio_p50']:.2f}x", f"{row['ndcg@10']:.4f}"] for name, row in result["columns"].items()]
    return markdown_table(header, rows)


def cpu_markdown(result: dict) -> str:
    """CPU ms per answer: each stack process, the sum, the sum / the baseline's, the query embedding's part
    and the rest / the baseline's rest; then how the baseline and the background were measured."""
    columns = {name: row["cpu"] for name, row in result["columns"].items() if "cpu" in row}
    processes = ordered(p for name, cpu in columns.items() if name != BASELINE for p in cpu["per_process_ms"])
    header = ["path", *processes, "CPU ms / answer", "/ baseline", "query embedding", "outside it", "/ baseline"]
    rows = []
    for name, cpu in columns.items():
        per = {} if name == BASELINE else cpu["per_process_ms"]
        rows.append([name, *(_cell(per.get(p)) for p in processes), _cell(cpu["total_ms"]), _cell(cpu["ratio"], "x"),
                     _cell(cpu["embed_ms"]), _cell(cpu["outside_embedding_ms"]), _cell(cpu["outside_embedding_ratio"], "x")])
    base, during = result["cpu"]["baseline"], result["cpu"]["stack_during_baseline_ms"]
    notes = [
        f"baseline: CPU time of its one thread (time.thread_time) per query, {base['thread_ms']:.2f} ms, of which "
        f"its query embedding {base['embed_ms']:.2f} ms; this process's CPU over the same calls {base['process_ms']:.2f} ms.",
        "stack query embedding: texts embedded per answer x the baseline's embedding CPU per text (estimated).",
    ]
    if result["cpu"].get("query_cache"):
        notes.append("the stack's query vector cache is on: a mode that found the query's vector cached embedded "
                     "nothing, so these are not a fresh query's figures and the embedding split is left out; "
                     f"for fresh-query figures start the stack with {QUERY_CACHE_OFF_ENV}.")
    if result["cpu"]["per_answer_ms"]:
        notes.append(f"stack CPU while the baseline ran (background, trailing work): {sum(during.values()):.2f} ms "
                     f"per query ({', '.join(f'{p} {ms:.2f}' for p, ms in during.items())}).")
    else:
        notes.append("no stack CPU was measured (--no-cpu, or no process of these settings' stack found).")
    return markdown_table(header, rows) + "\n\n" + "\n".join(notes)


def budget_markdown(budget: dict[str, dict[str, float]]) -> str:
    stages = list(dict.fromkeys(s for per_mode in budget.values() for s in per_mode))
    rows = [[stage, *(f"{budget[m][stage]:.2f}" if stage in budget[m] else "" for m in budget)] for stage in stages]
    return markdown_table(["stage", *budget], rows)
