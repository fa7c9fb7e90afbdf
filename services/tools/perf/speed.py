"""`hybridsearch speed DIR`: sequential latency through the gateway against the in-process baseline.

Every judged query of a BEIR folder runs, one at a time, through the in-process library baseline
(perf.baseline) and through the gateway in each mode, interleaved query by query, so a machine that
slows down mid-run slows every column alike and the ratios stay honest. Each column also gets its
nDCG@10 from the same answers. A second pass with explain on collects the gateway's stage timings
(legs as the gateway saw them, the legs' own engine and embedding time, fusion, rerank) for the
per-hop budget; it is separate because explain makes answers larger.
"""

from __future__ import annotations

import statistics
import time
from collections import defaultdict
from dataclasses import dataclass

import numpy as np
from ranx import Qrels, Run, evaluate

from hybridsearch.client import GatewayClient
from hybridsearch.tools.perf.baseline import LibraryBaseline
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


def summarise(latencies: list[float]) -> dict[str, float]:
    values = np.asarray(latencies)
    return {f"p{q}_ms": round(float(np.percentile(values, q)), 2) for q in (50, 95, 99)}


def _ranked_run(doc_ids: list[str]) -> dict[str, float]:
    # ranx wants strictly ordered scores: rank-derived ones keep the answer's order.
    return {d: float(len(doc_ids) - i) for i, d in enumerate(doc_ids)} or {"__no_hit__": 0.0}


def run_speed(client: GatewayClient, baseline: LibraryBaseline, queries: dict[str, str], qrels: dict,
              collection: str, modes: list[str], top_k: int = 10, warmup: int = 20, progress=None) -> dict:
    """Latency percentiles, nDCG@10 and the p50 ratio to the baseline for the baseline and each mode."""
    columns = [BASELINE, *modes]
    latencies: dict[str, list[float]] = defaultdict(list)
    hops: dict[str, list[float]] = defaultdict(list)  # client-observed minus the gateway's own took_ms
    runs: dict[str, dict[str, dict[str, float]]] = defaultdict(dict)
    texts = list(queries.values())
    for text in texts[:warmup]:  # untimed: load models, open collections, fill connection pools
        baseline.search(text, top_k)
        for name in modes:
            client.search(SPEED_MODES[name].request(text, collection, top_k))
    for qid, text in queries.items():
        hits, ms = baseline.timed_search(text, top_k)
        latencies[BASELINE].append(ms)
        runs[BASELINE][qid] = _ranked_run(hits)
        for name in modes:
            started = time.perf_counter()
            response = client.search(SPEED_MODES[name].request(text, collection, top_k))
            elapsed = (time.perf_counter() - started) * 1000
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
    return {"queries": len(queries), "top_k": top_k, "columns": out}


def stage_budget(client: GatewayClient, queries: dict[str, str], collection: str, modes: list[str],
                 top_k: int = 10) -> dict[str, dict[str, float]]:
    """Median milliseconds of every stage the gateway reports (explain on), per mode."""
    budget: dict[str, dict[str, float]] = {}
    for name in modes:
        stages: dict[str, list[float]] = defaultdict(list)
        for text in queries.values():
            response = client.search(SPEED_MODES[name].request(text, collection, top_k, explain=True))
            for timing in response.explain.timings:
                stages[timing.stage].append(timing.ms)
            stages["gateway total (took_ms)"].append(response.took_ms)
        budget[name] = {stage: round(statistics.median(values), 2) for stage, values in stages.items()}
    return budget


def to_markdown(result: dict) -> str:
    lines = ["| path | p50 ms | p95 ms | p99 ms | p50 / baseline | nDCG@10 |", "|---|---|---|---|---|---|"]
    for name, row in result["columns"].items():
        lines.append(f"| {name} | {row['p50_ms']:.2f} | {row['p95_ms']:.2f} | {row['p99_ms']:.2f} | "
                     f"{row['ratio_p50']:.2f}x | {row['ndcg@10']:.4f} |")
    return "\n".join(lines)


def budget_markdown(budget: dict[str, dict[str, float]]) -> str:
    stages = list(dict.fromkeys(s for per_mode in budget.values() for s in per_mode))
    lines = [f"| stage | {' | '.join(budget)} |", "|---|" + "---|" * len(budget)]
    for stage in stages:
        cells = [f"{budget[m][stage]:.2f}" if stage in budget[m] else "" for m in budget]
        lines.append(f"| {stage} | {' | '.join(cells)} |")
    return "\n".join(lines)
