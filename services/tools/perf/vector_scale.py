"""The vector store at a corpus size, in-process, with no BM25 side and no gRPC: what the vector leg's
engine costs at 1M, beside bm25_scale.py's BM25 figures.

    hybridsearch vector-scale ~/.cache/hybridsearch/scale/scale-1000000/corpus.jsonl.gz \
        --queries-from ../shared/datasets/scifact --data-dir /tmp/vector-1m --embedder static-minilm

- bulk load: the corpus chunked as the gateway chunks it, each batch's vectors from the embedding cache
  (`scale-corpus --embed` fills it; a miss is embedded here), written into the service's own store
  (qdrant-edge, the served settings) with no index build in between; load seconds, and within them the
  embedding's and the writes';
- HNSW build: one optimize() after the bulk load (what the store runs once writes pause), timed;
- then store_probe's figures on the same data dir: reopen, ANN recall@10 / @100 against the exact scan of
  the same vectors, search p50 / p99 in the engine, disk;
- a written document's visibility: `writes` new passages written one at a time into the built store,
  each searched for by its own vector right after its write returns;
- the process's peak resident memory (the embedder and the cache's connection included).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import resource
import time
from pathlib import Path

import numpy as np
import qdrant_edge as qe

from hybridsearch.text.chunking import indexed_text
from hybridsearch.config.settings import Settings
from hybridsearch.corpus import read_documents
from hybridsearch.gateway.ingest.chunks import document_chunks
from hybridsearch.tools.perf.store_probe import data_size_mib, probe
from hybridsearch.v1 import ingest_pb2
from hybridsearch.vector.edge import EdgeStore
from hybridsearch.vector.edge_models import edge_search_params
from hybridsearch.vector.embedder import EmbeddingCache, open_embedder
from hybridsearch.vector.points import point_id

COLLECTION = "vector-scale"
LOADED = "vector-scale-loaded.json"  # beside the store: a finished bulk load's figures (a resumed run skips it)
LOAD_FIGURES = ("documents", "chunks", "load_s", "load_docs_per_s", "embed_s", "write_s", "embedded_now",
                "peak_rss_after_load_mib")
# The vector settings a run's figures depend on, recorded with them.
RECORDED_SETTINGS = {"hnsw_m", "hnsw_ef_construct", "hnsw_ef", "quantization", "quantization_always_ram",
                     "quantization_rescore", "quantization_oversampling", "on_disk_vectors", "on_disk_payload",
                     "edge_index_backlog"}
NEVER = 1e9  # no background build during the bulk load: the store builds once, after it


def _texts(chunks) -> list[str]:
    return [indexed_text(c.title, c.heading, c.text) for c in chunks]


def _store(settings: Settings, dim: int) -> EdgeStore:
    """The service's store on the tool's data dir, with no background build (the tool builds once)."""
    return EdgeStore(path=settings.data_dir / "qdrant-edge", dim=dim, settings=settings.vector,
                     quiet_s=NEVER, max_defer_s=NEVER)


async def _points(settings: Settings, dim: int) -> tuple[int, int]:
    """(points, indexed vectors) of a store left by an earlier run; (0, 0) if there is none."""
    if not (settings.data_dir / "qdrant-edge" / COLLECTION).exists():
        return 0, 0
    store = _store(settings, dim)
    info = (await store._shard(COLLECTION)).info()
    await store.close()
    return info.points_count, info.indexed_vectors_count


async def _load(settings: Settings, corpus: Path, cache: EmbeddingCache, batch: int, progress,
                documents_limit: int | None) -> dict:
    store = _store(settings, cache.dim)
    words = settings.vector.chunk_words or settings.chunk_words
    documents, _ = read_documents(corpus)
    documents = itertools.islice(documents, documents_limit)
    count, chunks_written, embed_s, write_s, pending = 0, 0, 0.0, 0.0, []
    started = time.perf_counter()

    async def flush() -> None:
        nonlocal chunks_written, embed_s, write_s, pending
        t = time.perf_counter()
        vectors = await asyncio.to_thread(cache.embed, _texts(pending))
        embed_s += time.perf_counter() - t
        t = time.perf_counter()
        chunks_written += (await store.write(COLLECTION, pending, vectors)).chunks_written
        write_s += time.perf_counter() - t
        pending = []

    for doc in documents:
        pending += document_chunks(doc, words, settings.vector.chunk_overlap_words)
        count += 1
        if count % batch == 0:
            await flush()
            progress(count)
    if pending:
        await flush()
    load_s = time.perf_counter() - started
    await store.close()
    return {"documents": count, "chunks": chunks_written, "load_s": round(load_s, 1),
            "load_docs_per_s": round(count / load_s, 1), "embed_s": round(embed_s, 1), "write_s": round(write_s, 1),
            "embedded_now": cache.misses}


async def _build(settings: Settings, dim: int) -> dict:
    """The one HNSW build after the bulk load (what the store runs once writes pause), timed."""
    store = _store(settings, dim)
    started = time.perf_counter()
    await store.optimize(COLLECTION)
    build_s = time.perf_counter() - started
    info = (await store._shard(COLLECTION)).info()
    await store.close()
    return {"hnsw_build_s": round(build_s, 1), "indexed_after_build": info.indexed_vectors_count,
            "segments_after_build": info.segments_count}


async def _visibility(settings: Settings, cache: EmbeddingCache, writes: int) -> dict:
    """Each new passage written alone, then searched for by its own vector: ms from the write call until
    a search holds it, and how many were found by the first search."""
    store = EdgeStore(path=settings.data_dir / "qdrant-edge", dim=cache.dim, settings=settings.vector,
                      quiet_s=NEVER, max_defer_s=NEVER)
    shard = await store._shard(COLLECTION)
    times, first_found = [], 0
    for i in range(writes):
        doc = ingest_pb2.Document(id=f"visibility-{i}", text=f"a passage written into the built store, number {i}: "
                                                             "visibility of one write at scale")
        chunks = document_chunks(doc, settings.chunk_words, settings.chunk_overlap_words)
        vectors = cache.embedder.embed(_texts(chunks))
        wanted = str(point_id(doc.id, 0))
        started = time.perf_counter()
        await store.write(COLLECTION, chunks, vectors)
        first = True
        params = edge_search_params(await store.params_of(COLLECTION))
        while True:
            (hits,) = shard.query_batch(qe.QueryBatchRequest([qe.QueryRequest(
                limit=10, query=qe.Query.Nearest(vectors[0].tolist()), params=params,
                with_payload=False, with_vector=False)]))
            if any(str(h.id) == wanted for h in hits):
                break
            first = False
        times.append((time.perf_counter() - started) * 1000)
        first_found += first
    await store.delete(COLLECTION, [f"visibility-{i}" for i in range(writes)])
    await store.close()
    return {"writes": writes, "visible_p50_ms": round(float(np.median(times)), 2),
            "visible_max_ms": round(float(np.max(times)), 2), "on_first_search": first_found}


def _peak_rss_mib() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def run(settings: Settings, corpus: Path, queries: list[str], embedder: str, batch: int = 500,
        progress=lambda n: None, writes: int = 20, documents_limit: int | None = None,
        record=lambda out: None, efs: tuple[int, ...] = ()) -> dict:
    """The figures above for the corpus's first `documents_limit` documents (all: None). `record(out)` is
    called after each phase with the figures so far (a killed run keeps them). A run finding the store of
    an earlier one resumes it: a finished load (its figures kept beside the store, LOADED) is not repeated,
    a load that was cut short is run again over what it wrote (writes are upserts by point id), and an
    indexed store skips the build."""
    cfg = settings.vector
    cache = EmbeddingCache(settings.data_dir / "cache" / "embeddings.sqlite",
                           open_embedder(embedder, cfg.max_seq_length, cfg.batch_size), cfg.max_seq_length)
    out = {"corpus": str(corpus), "embedder": embedder, "dim": cache.dim, "batch": batch,
           "settings": cfg.model_dump(include=RECORDED_SETTINGS)}
    loaded = settings.data_dir / LOADED
    points, indexed = asyncio.run(_points(settings, cache.dim))
    if points and loaded.exists():
        out.update(json.loads(loaded.read_text()))
        out["resumed"] = {"points": points, "indexed": indexed}
    else:
        out.update(asyncio.run(_load(settings, corpus, cache, batch, progress, documents_limit)))
        out["peak_rss_after_load_mib"] = _peak_rss_mib()
        loaded.write_text(json.dumps({k: out[k] for k in LOAD_FIGURES}, indent=2))
        record(out)
        points, indexed = out["chunks"], 0
    if indexed < points:
        out.update(asyncio.run(_build(settings, cache.dim)))
        out["peak_rss_after_build_mib"] = _peak_rss_mib()
        record(out)
    probed = asyncio.run(probe(settings, COLLECTION, queries, bm25=False, efs=efs))
    out.update({k: v for k, v in probed.items() if k not in ("collection", "embedder", "dim")})
    record(out)
    out["visibility"] = asyncio.run(_visibility(settings, cache, writes))
    out["vector_disk_mib"] = data_size_mib(settings.data_dir / "qdrant-edge" / COLLECTION)
    out["peak_rss_mib"] = _peak_rss_mib()
    record(out)
    return out
