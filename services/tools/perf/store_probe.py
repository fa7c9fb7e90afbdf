"""A stopped stack's stores, probed in-process: reopen time, ANN recall@10 against exact search, sizes.

Run with the services stopped (each engine holds its data dir's writer lock):

    hybridsearch store-probe -c scale-100000 --queries-from ../shared/datasets/scifact

- reopen: the time from nothing to a first answered search, for the vector store (qdrant-edge shard
  load) and the BM25 store (tantivy index open), each in a fresh engine object;
- ANN recall@10: the vector store's HNSW answer (the served search parameters) against the same
  shard's exact scan, on real query embeddings by the configured embedder (the vectors the store holds:
  vector.embedder), at the leg's own depth as well as at 10;
- the processes' peak RSS after opening (this probe's own, not the services').
"""

from __future__ import annotations

import asyncio
import resource
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import qdrant_edge as qe

from hybridsearch.bm25.service import build_engine
from hybridsearch.config.settings import Settings
from hybridsearch.tools.perf.edge_bench import recall_at_k
from hybridsearch.vector.edge import EdgeStore
from hybridsearch.vector.edge_models import edge_search_params
from hybridsearch.vector.e5 import Role
from hybridsearch.vector.embedder import open_embedder


async def probe(settings: Settings, collection: str, queries: list[str], depth: int = 100, bm25: bool = True,
                efs: Sequence[int] = ()) -> dict:
    """The figures above; without `bm25`, the vector store's alone (a data dir with no BM25 index). `efs`:
    search beams measured beside the served one (keys suffixed `_ef<N>`), against the same exact lists."""
    cfg = settings.vector
    embedder = open_embedder(cfg.embedder, cfg.max_seq_length, cfg.batch_size, role=Role.QUERY)
    vectors = embedder.embed(queries)
    out: dict = {"collection": collection, "embedder": cfg.embedder, "dim": embedder.dim, "queries": len(queries)}

    started = time.perf_counter()
    store = EdgeStore(path=settings.data_dir / "qdrant-edge", dim=embedder.dim, settings=cfg, quiet_s=3600)
    first = await store.search(collection, vectors[:1], 10, [])
    out["vector_reopen_s"] = round(time.perf_counter() - started, 3)
    if not first[0]:
        raise RuntimeError(f"vector collection {collection!r} is empty or missing under {settings.data_dir}")
    shard = await store._shard(collection)
    info = shard.info()
    out["vector_points"], out["vector_indexed"], out["vector_segments"] = (
        info.points_count, info.indexed_vectors_count, info.segments_count)

    def ids(params: qe.SearchParams, k: int) -> tuple[list[list[str]], list[float]]:
        lists, times = [], []
        for v in vectors:
            t = time.perf_counter()
            (hits,) = shard.query_batch(qe.QueryBatchRequest([qe.QueryRequest(
                limit=k, query=qe.Query.Nearest(v.tolist()), params=params, with_payload=False, with_vector=False)]))
            times.append((time.perf_counter() - t) * 1000)
            lists.append([str(h.id) for h in hits])
        return lists, times

    served = edge_search_params(await store.params_of(collection))  # the beam this collection is served with
    # the exact scan of the original vectors, never their int8 copies: recall is against the truth
    exact_params = qe.SearchParams(hnsw_ef=served.hnsw_ef, exact=True,
                                   quantization=qe.QuantizationSearchParams(ignore=True))
    for k in sorted({10, depth}):
        exact, exact_ms = ids(exact_params, k)
        out[f"exact_p50_ms@{k}"] = round(float(np.median(exact_ms)), 2)
        for ef in [served.hnsw_ef, *(e for e in efs if e != served.hnsw_ef)]:
            tag = "" if ef == served.hnsw_ef else f"_ef{ef}"  # the served beam's keys stay as they were
            params = qe.SearchParams(hnsw_ef=ef, exact=False, quantization=served.quantization, acorn=served.acorn)
            ann, ann_ms = ids(params, k)
            out[f"ann_recall@{k}{tag}"] = round(recall_at_k(ann, exact, k), 4)
            out[f"ann_p50_ms@{k}{tag}"] = round(float(np.median(ann_ms)), 2)
            out[f"ann_p99_ms@{k}{tag}"] = round(float(np.percentile(ann_ms, 99)), 2)
    await store.close()
    out["vector_disk_mib"] = data_size_mib(settings.data_dir / "qdrant-edge" / collection)
    if not bm25:
        out["probe_peak_rss_mib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
        return out

    started = time.perf_counter()
    bm25 = build_engine(settings)
    await bm25.search(collection, queries[:1], 10, [])
    out["bm25_reopen_s"] = round(time.perf_counter() - started, 3)
    out["bm25_chunks"] = (await bm25.stats(collection)).chunks
    await bm25.close()
    out["bm25_disk_mib"] = data_size_mib(settings.data_dir / "bm25-tantivy" / collection)
    out["probe_peak_rss_mib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    return out


def run_probe(settings: Settings, collection: str, queries: list[str], depth: int = 100, bm25: bool = True,
              efs: Sequence[int] = ()) -> dict:
    return asyncio.run(probe(settings, collection, queries, depth, bm25, efs))


def data_size_mib(path: Path) -> float:
    return round(sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 2**20, 1) if path.exists() else 0.0
