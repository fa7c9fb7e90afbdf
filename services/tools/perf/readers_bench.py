"""What document readers cost and change (issue 36), on a BEIR collection through a running stack with API keys
(`hybridsearch serve all`): its documents split by a hash of their ids into readers' shares (a reader of `p10` reads
10% of them), and for each share and mode:

- the search as that reader on the whole collection (`acl`: the engines filter by its readers),
- the same search on a collection holding only that share, without readers (`only`: what it should equal),
- the same search on the whole collection without readers (`open`: an admin key; the latency baseline),

each query's three searches in turn, their order rotated from one query to the next. Reported: nDCG@10 of `acl` and
`only` against the judgments restricted to the share (queries with a relevant document in it), how many queries
got as many hits as `only` (a full page wherever the share has one), the mean overlap of their top-10 ids, and p50
latencies with the ratio `acl` / `open`. Every search with the score floor off (`no_floor`), so the page is what
the engines found, not what a calibration kept."""

from __future__ import annotations

import hashlib
import statistics
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ranx import Qrels, Run, evaluate

from hybridsearch.client import GatewayClient, NotFound
from hybridsearch.corpus import beir_corpus_file, read_beir_corpus
from hybridsearch.security.acl import parse_acl
from hybridsearch.tools.bench import BENCH_MODES, percentile
from hybridsearch.v1 import ingest_pb2, search_pb2

SHARES = (1, 10, 50)
TOP = 10


def bucket(doc_id: str) -> int:
    """A document's place in 0-99, from its id alone (the same on every run)."""
    return int(hashlib.sha256(doc_id.encode()).hexdigest()[:8], 16) % 100


def group(share: int) -> str:
    return f"group:p{share}"


def readers_of(doc_id: str, shares: Iterable[int]) -> list[str]:
    """The groups whose share holds the document (`group:nobody` when none does)."""
    return [group(s) for s in shares if bucket(doc_id) < s] or ["group:nobody"]


def with_acl(docs: Iterable[ingest_pb2.Document], shares: tuple[int, ...]) -> Iterable[ingest_pb2.Document]:
    for doc in docs:
        doc.acl.CopyFrom(parse_acl(readers_of(doc.id, shares)))
        yield doc


def ensure(client: GatewayClient, collection: str, documents: Callable[[], Iterable[ingest_pb2.Document]],
           count: int) -> float:
    """The collection written unless both stores hold `count` documents already; seconds spent."""
    try:
        if all(s.documents == count for s in client.stats(collection).stores):
            return 0.0
    except NotFound:
        pass
    started = time.perf_counter()
    client.index(collection, documents())
    return time.perf_counter() - started


@dataclass
class Cell:
    """One share and mode: the three searches' figures."""

    share: int
    mode: str
    latencies: dict[str, list[float]] = field(default_factory=lambda: {"acl": [], "only": [], "open": []})
    runs: dict[str, dict[str, dict[str, float]]] = field(default_factory=lambda: {"acl": {}, "only": {}})
    full: int = 0  # queries whose `acl` page holds as many hits as `only`'s
    overlap: list[float] = field(default_factory=list)
    foreign: int = 0  # hits of `acl` outside the share: must stay 0

    def figures(self, qrels: dict[str, dict[str, int]]) -> dict:
        judged = {q: r for q, r in qrels.items() if q in self.runs["acl"] and any(v > 0 for v in r.values())}
        ndcg = {}
        for kind in ("acl", "only"):
            run = {q: self.runs[kind][q] or {"__no_hit__": 0.0} for q in judged}
            ndcg[kind] = round(float(evaluate(Qrels(judged), Run(run), "ndcg@10")), 4) if judged else None
        p50 = {kind: round(statistics.median(v), 2) for kind, v in self.latencies.items()}
        return {"share": self.share, "mode": self.mode, "queries": len(self.runs["acl"]), "judged": len(judged),
                "ndcg@10_acl": ndcg["acl"], "ndcg@10_only": ndcg["only"], "full_pages": self.full,
                "top10_overlap": round(statistics.mean(self.overlap), 4) if self.overlap else None,
                "foreign_hits": self.foreign, "p50_ms": p50,
                "p95_ms": {kind: round(percentile(v, 0.95), 2) for kind, v in self.latencies.items()},
                "p50_ratio_acl_open": round(p50["acl"] / p50["open"], 3) if p50["open"] else None}


def ranked(hits) -> dict[str, float]:
    """A page as a ranx run row: rank-derived scores keep the service's order."""
    ids = list(dict.fromkeys(h.doc_id for h in hits))
    return {d: float(len(ids) - i) for i, d in enumerate(ids)}


def measure(searchers: dict[str, Callable[[search_pb2.SearchRequest], search_pb2.SearchResponse]],
            collections: dict[str, str], queries: dict[str, str], share: int, mode: str, progress=None) -> Cell:
    """Each query as the reader (`acl`), on the share's own collection (`only`) and unrestricted (`open`)."""
    bench = BENCH_MODES[mode]
    cell = Cell(share, mode)
    kinds = ("acl", "only", "open")
    for n, (qid, text) in enumerate(queries.items()):
        pages = {}
        for kind in kinds[n % 3:] + kinds[:n % 3]:  # rotated: no kind always first or last
            request = bench.request(text, collections[kind], no_floor=True)
            request.top_k = TOP
            started = time.perf_counter()
            pages[kind] = searchers[kind](request)
            cell.latencies[kind].append((time.perf_counter() - started) * 1000)
        acl, only = pages["acl"].hits, pages["only"].hits
        cell.runs["acl"][qid], cell.runs["only"][qid] = ranked(acl), ranked(only)
        cell.full += len(acl) >= len(only)
        cell.foreign += sum(bucket(h.doc_id) >= share for h in acl)
        ids_acl, ids_only = {h.doc_id for h in acl}, {h.doc_id for h in only}
        cell.overlap.append(len(ids_acl & ids_only) / max(1, len(ids_only)))
        if progress:
            progress()
    return cell


def shared_qrels(qrels: dict[str, dict[str, int]], share: int) -> dict[str, dict[str, int]]:
    """The judgments of the documents in a share."""
    return {q: {d: r for d, r in judged.items() if bucket(d) < share} for q, judged in qrels.items()}


def forget_expansions(cache_url: str, collections: Iterable[str]) -> int:
    """The expansion cache's entries of these collections deleted, so every kind of search starts cold (an entry
    kept by an earlier run, of other code, would answer for one kind and not another); how many were."""
    import redis

    from hybridsearch.expansion.cache import collection_pattern

    client = redis.Redis.from_url(cache_url)
    try:
        keys = [k for c in collections for k in client.scan_iter(match=collection_pattern(c), count=1000)]
        return client.delete(*keys) if keys else 0
    finally:
        client.close()


def corpus_of(folder: Path) -> tuple[Path, int]:
    corpus = beir_corpus_file(folder)
    if corpus is None:
        raise FileNotFoundError(f"{folder} has no corpus.jsonl or corpus.jsonl.gz")
    return corpus, sum(1 for _ in read_beir_corpus(corpus))
