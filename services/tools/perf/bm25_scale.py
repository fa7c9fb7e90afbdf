"""The BM25 store at a corpus size, in-process, with no vector side: what the BM25 leg costs at 1M.

The vector side of a 1M corpus needs a million MiniLM passage embeddings (4.5 hours of this machine's two
cores, docs/performance.md §5); the BM25 side needs none, so its scale is measured on its own:

    hybridsearch bm25-scale ~/.cache/hybridsearch/scale/scale-1000000/corpus.jsonl.gz \
        --queries-from ../shared/datasets/scifact --data-dir /tmp/bm25-1m

- index throughput: documents a second into the service's own engine (tantivy; chunked as the gateway
  chunks them, batches as the gateway sends them, a commit per batch as a store acknowledges them);
- reopen: a fresh engine object to the first answered search (what a restarted BM25 service pays);
- search: the leg's query (depth `leg_depth`; the engine decodes every hit's payload, the service trims
  texts afterwards) for real queries, p50 / p99 in the engine, and the process's peak resident memory and
  the index's size on disk;
- small writes: `writers` clients each replacing one document per request (a changed text), as live
  updates arrive, with a commit per write (`max_group` 1) and with group commit (bm25/group_commit.py),
  alternated in the same run: writes a second, p50 / p99 per write, commits made.
"""

from __future__ import annotations

import asyncio
import itertools
import resource
import time
from pathlib import Path

import numpy as np

from hybridsearch.bm25.group_commit import MAX_GROUP
from hybridsearch.bm25.service import build_engine
from hybridsearch.config.settings import Settings
from hybridsearch.corpus import read_documents
from hybridsearch.gateway.ingest.chunks import document_chunks
from hybridsearch.v1 import ingest_pb2

COLLECTION = "bm25-scale"


def _dir_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


async def _index(settings: Settings, corpus: Path, batch: int, progress, collection: str) -> tuple[int, float]:
    engine = build_engine(settings)
    documents, _ = read_documents(corpus)
    count, pending, started = 0, [], time.perf_counter()
    for doc in documents:
        pending += document_chunks(doc, settings.chunk_words, settings.chunk_overlap_words)
        count += 1
        if count % batch == 0:
            await engine.upsert(collection, pending)
            pending = []
            progress(count)
    if pending:
        await engine.upsert(collection, pending)
    seconds = time.perf_counter() - started
    await engine.close()
    return count, seconds


async def _search(settings: Settings, queries: list[str], collection: str) -> dict:
    started = time.perf_counter()
    engine = build_engine(settings)
    await engine.search(collection, queries[:1], settings.query.leg_depth, [])
    reopen_s = time.perf_counter() - started
    times = []
    for query in queries:
        t = time.perf_counter()
        await engine.search(collection, [query], settings.query.leg_depth, [])
        times.append((time.perf_counter() - t) * 1000)
    stats = await engine.stats(collection)
    await engine.close()
    return {"reopen_s": round(reopen_s, 3), "search_p50_ms": round(float(np.percentile(times, 50)), 3),
            "search_p99_ms": round(float(np.percentile(times, 99)), 3), "chunks": stats.chunks,
            "segments": stats.details.get("segments", "")}


async def _small_writes(settings: Settings, docs: list[ingest_pb2.Document], writers: int, max_group: int,
                        round_: int, collection: str) -> dict:
    """`writers` concurrent clients, each replacing its share of `docs` one request at a time."""
    engine = build_engine(settings)
    engine.max_group = max_group
    times: list[float] = []

    async def writer(mine: list[ingest_pb2.Document]) -> None:
        for doc in mine:
            changed = ingest_pb2.Document()
            changed.CopyFrom(doc)
            changed.text += f" (update {round_}, group {max_group})"
            chunks = document_chunks(changed, settings.chunk_words, settings.chunk_overlap_words)
            t = time.perf_counter()
            result = await engine.upsert(collection, chunks)
            times.append((time.perf_counter() - t) * 1000)
            if result.documents_written != 1:
                raise RuntimeError(f"{doc.id}: {result}")

    started = time.perf_counter()
    await asyncio.gather(*(writer(docs[w::writers]) for w in range(writers)))
    seconds = time.perf_counter() - started
    commits = engine.commits(collection)
    await engine.close()
    return {"writes": len(times), "writes_per_s": round(len(times) / seconds, 1),
            "p50_ms": round(float(np.percentile(times, 50)), 2), "p99_ms": round(float(np.percentile(times, 99)), 2),
            "commits": commits}


def small_writes(settings: Settings, corpus: Path, writers: int = 8, per_writer: int = 50, rounds: int = 2,
                 collection: str = COLLECTION) -> dict:
    """A commit per write vs group commit, alternated `rounds` times on the indexed collection; each round's
    figures, and the ratio of the medians' writes a second."""
    documents, _ = read_documents(corpus)
    docs = list(itertools.islice(documents, writers * per_writer))
    out: dict[str, list] = {"one_commit_per_write": [], "group_commit": []}
    for r in range(rounds):
        for name, max_group in (("one_commit_per_write", 1), ("group_commit", MAX_GROUP)):
            out[name].append(asyncio.run(_small_writes(settings, docs, writers, max_group, r, collection)))
    rate = {name: float(np.median([x["writes_per_s"] for x in runs])) for name, runs in out.items()}
    return {"writers": writers, "per_writer": per_writer, **out,
            "throughput_ratio": round(rate["group_commit"] / rate["one_commit_per_write"], 2)}


def run(settings: Settings, corpus: Path, queries: list[str], batch: int = 500, progress=lambda n: None,
        writers: int = 8, collection: str = COLLECTION) -> dict:
    """The figures above; `collection`: the index's name (vector-scale's, to serve both stores of one
    corpus from one data dir)."""
    documents, seconds = asyncio.run(_index(settings, corpus, batch, progress, collection))
    out = {"corpus": str(corpus), "documents": documents, "index_s": round(seconds, 1),
           "index_docs_per_s": round(documents / seconds, 1), "queries": len(queries)}
    out.update(asyncio.run(_search(settings, queries, collection)))
    out["peak_rss_mib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    out["on_disk_bytes"] = _dir_bytes(settings.data_dir / "bm25-tantivy" / collection)
    out["on_disk_mib"] = round(out["on_disk_bytes"] / 2**20, 1)
    if writers:
        out["small_writes"] = small_writes(settings, corpus, writers, collection=collection)
    return out
