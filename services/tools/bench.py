"""`hybridsearch bench`: index a BEIR-layout folder once, run every judged query through the gateway
in each mode, and score the runs with ranx (trec_eval definitions: graded gains for nDCG)."""

from __future__ import annotations

import hashlib
import re
import statistics
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from ranx import Qrels, Run, evaluate

from hybridsearch.client import GatewayClient, NotFound
from hybridsearch.config.settings import Settings
from hybridsearch.corpus import beir_corpus_file, read_documents
from hybridsearch.tools.quality.calibration import answering, report as calibration_report
from hybridsearch.v1 import common_pb2, search_pb2

METRICS = ("ndcg@10", "recall@100", "mrr@10")
DEPTH = 100


@dataclass(frozen=True)
class BenchMode:
    """How a bench mode fills a SearchRequest; `default` leaves everything as `hybridsearch query` does."""

    mode: int = common_pb2.RETRIEVAL_MODE_UNSPECIFIED
    effort: int = common_pb2.EFFORT_UNSPECIFIED
    rerank: bool | None = None

    def request(self, query: str, collection: str, fuzzy: bool | None = None,
                no_floor: bool = False) -> search_pb2.SearchRequest:
        """`no_floor`: every hit, the deployment's score floor off (--calibration pools them all)."""
        req = search_pb2.SearchRequest(query=query, collection=collection, top_k=DEPTH, mode=self.mode, effort=self.effort,
                                       no_floor=no_floor)
        if self.rerank is not None:
            req.rerank = self.rerank
        if fuzzy is not None:  # unset: the collection's default
            req.fuzzy = fuzzy
        return req


BENCH_MODES: dict[str, BenchMode] = {
    "bm25": BenchMode(common_pb2.RETRIEVAL_MODE_BM25, common_pb2.EFFORT_FAST),
    "vector": BenchMode(common_pb2.RETRIEVAL_MODE_VECTOR, common_pb2.EFFORT_FAST),
    "hybrid": BenchMode(common_pb2.RETRIEVAL_MODE_HYBRID, common_pb2.EFFORT_FAST),
    # THOROUGH expands with the LLM when one is configured, else with pseudo-relevance feedback.
    "expansion": BenchMode(common_pb2.RETRIEVAL_MODE_HYBRID, common_pb2.EFFORT_THOROUGH, rerank=False),
    # The default path with the reranker forced on: what turning it on by default would give.
    "rerank": BenchMode(rerank=True),
    "default": BenchMode(),
    # THOROUGH as a caller gets it: LLM expansion (PRF without one) and the deep rerank pool.
    "thorough": BenchMode(effort=common_pb2.EFFORT_THOROUGH),
}


def collection_name(folder: Path, settings: Settings) -> str:
    """One bench collection per dataset and per index-time setting, so a cached index is never stale."""
    index_time = (settings.bm25.stemmer, settings.bm25.stopwords, settings.vector.embedder,
                  settings.vector.max_seq_length, settings.chunk_words, settings.chunk_overlap_words)
    if settings.vector.chunk_words:  # the vector store's own passages (appended: existing names stay valid)
        index_time += (settings.vector.chunk_words, settings.vector.chunk_overlap_words)
    fingerprint = hashlib.sha1(repr(index_time).encode()).hexdigest()[:8]
    return f"bench-{re.sub(r'[^a-z0-9_-]+', '-', folder.resolve().name.lower())[:40]}-{fingerprint}"


def ensure_indexed(client: GatewayClient, folder: Path, collection: str, progress=None) -> int:
    """Indexes the corpus unless both stores already hold exactly its documents."""
    corpus = beir_corpus_file(folder)
    if corpus is None:
        raise FileNotFoundError(f"{folder} has no corpus.jsonl or corpus.jsonl.gz")
    documents, count = read_documents(corpus)
    try:
        stats = client.stats(collection)
    except NotFound:  # not indexed yet
        stats = None
    if stats is not None and stats.stores and all(s.documents == count for s in stats.stores):
        return 0
    client.index(collection, documents, on_batch=(lambda part: progress(part.documents_received)) if progress else None)
    return count or 0


def percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    k = (len(ordered) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


# Pools of (score, relevant) for --calibration: the calibrated score and the per-query blended one, over
# every returned hit and over each query's first 10 (what a client reads).
CALIBRATION_POOLS = {"score": ("score", DEPTH), "blended_score": ("blended_score", DEPTH),
                     "score@10": ("score", 10), "blended_score@10": ("blended_score", 10)}


TOP_FIELDS = ("score", "blended_score")


def pool(pooled: dict[str, list[tuple[float, bool]]], tops: dict[str, list[float]], hits,
         judgments: dict[str, int]) -> None:
    """One query's hits into every calibration pool (a hit is relevant when judged above 0), its top
    hit's scores into `tops` (0 for no hit)."""
    for name, (field, depth) in CALIBRATION_POOLS.items():
        pooled[name] += [(float(getattr(h, field)), judgments.get(h.doc_id, 0) > 0) for h in hits[:depth]]
    for field in TOP_FIELDS:
        tops[field].append(float(getattr(hits[0], field)) if hits else 0.0)


def run_mode(client: GatewayClient, bench_mode: BenchMode, queries: dict[str, str], qrels, collection: str,
             ignore_identical: bool, progress=None, fuzzy: bool | None = None, calibration: bool = False,
             unanswerable: dict[str, str] | None = None) -> dict:
    """One mode over the judged queries; with `calibration`, the calibration figures too, and with
    `unanswerable` queries (another domain's: every hit irrelevant) the same figures with them pooled in."""
    run: dict[str, dict[str, float]] = {}
    pooled: dict[str, list[tuple[float, bool]]] = {name: [] for name in CALIBRATION_POOLS}
    tops: dict[str, list[float]] = {field: [] for field in TOP_FIELDS}
    latencies = []
    expansion = Counter()  # how each query was expanded (llm:<model>, prf, a skip reason, a failure)
    for qid, text in queries.items():
        start = time.perf_counter()
        response = client.search(bench_mode.request(text, collection, fuzzy, no_floor=calibration))
        latencies.append((time.perf_counter() - start) * 1000)
        for leg in response.legs:
            if leg.name == "expansion":
                expansion[leg.reason.removesuffix(" (cached)")] += 1
        hits = {h.doc_id: float(h.score) for h in response.hits if not (ignore_identical and h.doc_id == qid)}
        # ranx needs strictly ordered scores to keep the service's order: use rank-derived scores.
        ordered = [d for d in (h.doc_id for h in response.hits) if d in hits]
        run[qid] = {d: float(len(ordered) - i) for i, d in enumerate(ordered)} or {"__no_hit__": 0.0}
        if calibration:
            pool(pooled, tops, [h for h in response.hits if h.doc_id in hits], qrels.get(qid, {}))
        if progress:
            progress()
    scores = evaluate(Qrels(qrels), Run(run), list(METRICS))
    out = {m: round(float(scores[m]), 4) for m in METRICS}
    out["p50_ms"] = round(statistics.median(latencies), 1)
    out["p95_ms"] = round(percentile(latencies, 0.95), 1)
    out["queries"] = len(queries)
    if expansion:
        out["expansion"] = dict(expansion.most_common())
    if calibration:
        out["calibration"] = calibration_figures(pooled, tops)
    if calibration and unanswerable:
        answerable = {field: list(values) for field, values in tops.items()}
        tops = {field: [] for field in TOP_FIELDS}
        for text in unanswerable.values():
            pool(pooled, tops, list(client.search(bench_mode.request(text, collection, fuzzy, no_floor=True)).hits), {})
            if progress:
                progress()
        out["calibration_with_unanswerable"] = calibration_figures(pooled, tops)
        out["calibration_with_unanswerable"]["answering_answerable"] = {
            field: answering(values) for field, values in answerable.items()}
    return out


def calibration_figures(pooled: dict[str, list[tuple[float, bool]]], tops: dict[str, list[float]]) -> dict:
    """The pools' figures, and the share of the queries in `tops` that return a hit at each min_score."""
    return {**{name: calibration_report(judged) for name, judged in pooled.items()},
            "answering": {field: answering(values) for field, values in tops.items()}}


def to_markdown(results: list[dict], metric: str = "ndcg@10") -> str:
    """One row per collection, one column per mode (metric, and p50 latency in ms)."""
    modes = list(dict.fromkeys(m for r in results for m in r["modes"]))
    lines = [f"| collection | {' | '.join(modes)} |", "|---|" + "---|" * len(modes)]
    for r in results:
        cells = [f"{r['modes'][m][metric]:.4f} ({r['modes'][m]['p50_ms']:.0f} ms)" if m in r["modes"] else "" for m in modes]
        lines.append(f"| {r['dataset']} | {' | '.join(cells)} |")
    return "\n".join(lines)
