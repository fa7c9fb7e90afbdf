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
  the index's size on disk.
"""

from __future__ import annotations

import asyncio
import resource
import time
from pathlib import Path

import numpy as np

from hybridsearch.bm25.service import build_engine
from hybridsearch.common.config import Settings
from hybridsearch.corpus import read_documents
from hybridsearch.gateway.ingest import document_chunks

COLLECTION = "bm25-scale"


def _dir_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


async def _index(settings: Settings, corpus: Path, batch: int, progress) -> tuple[int, float]:
    engine = build_engine(settings)
    documents, _ = read_documents(corpus)
    count, pending, started = 0, [], time.perf_counter()
    for doc in documents:
        pending += document_chunks(doc, settings.chunk_words, settings.chunk_overlap_words)
        count += 1
        if count % batch == 0:
            await engine.upsert(COLLECTION, pending)
            pending = []
            progress(count)
    if pending:
        await engine.upsert(COLLECTION, pending)
    seconds = time.perf_counter() - started
    await engine.close()
    return count, seconds


async def _search(settings: Settings, queries: list[str]) -> dict:
    started = time.perf_counter()
    engine = build_engine(settings)
    await engine.search(COLLECTION, queries[:1], settings.leg_depth, [])
    reopen_s = time.perf_counter() - started
    times = []
    for query in queries:
        t = time.perf_counter()
        await engine.search(COLLECTION, [query], settings.leg_depth, [])
        times.append((time.perf_counter() - t) * 1000)
    stats = await engine.stats(COLLECTION)
    await engine.close()
    return {"reopen_s": round(reopen_s, 3), "search_p50_ms": round(float(np.percentile(times, 50)), 3),
            "search_p99_ms": round(float(np.percentile(times, 99)), 3), "chunks": stats.chunks,
            "segments": stats.details.get("segments", "")}


def run(settings: Settings, corpus: Path, queries: list[str], batch: int = 500, progress=lambda n: None) -> dict:
    documents, seconds = asyncio.run(_index(settings, corpus, batch, progress))
    out = {"corpus": str(corpus), "documents": documents, "index_s": round(seconds, 1),
           "index_docs_per_s": round(documents / seconds, 1), "queries": len(queries)}
    out.update(asyncio.run(_search(settings, queries)))
    out["peak_rss_mib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    out["on_disk_bytes"] = _dir_bytes(settings.data_dir / "bm25-tantivy" / COLLECTION)
    out["on_disk_mib"] = round(out["on_disk_bytes"] / 2**20, 1)
    return out
