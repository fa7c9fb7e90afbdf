"""Measures the embedded (qdrant-edge) vector store: upsert throughput, index build, search latency,
ANN recall against exact search, memory, reopen time. A script, not a test:

    nice .venv/bin/python -m hybridsearch.tools.perf.edge_bench --points 100000

Vectors are synthetic, not embedded (embedding 100k passages takes hours on a laptop CPU):
`clustered_unit_vectors` draws unit vectors with the neighbourhood structure of MiniLM passage
embeddings — a shared direction, topics, subtopics with a low-rank spread, isotropic noise — tuned so
that on 5,393 vectors the mean cosine to the 1st/10th/100th neighbour and of a random pair are
0.65/0.51/0.44/0.11, against 0.69/0.53/0.39/0.13 for MiniLM over SciFact's passages.
Isotropic random vectors would be the ANN worst case, and nothing like text embeddings.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import shutil
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from hybridsearch.config.stores import VectorSettings
from hybridsearch.v1 import common_pb2
from hybridsearch.vector.edge import EdgeStore

STRUCTURE_SEED = 12345  # topics and subtopics: shared by corpus and queries drawn with other seeds


def clustered_unit_vectors(n: int, dim: int = 384, seed: int = 0, topics: int = 30, subtopics: int = 100,
                           rank: int = 12) -> np.ndarray:
    """n float32 unit vectors, MiniLM-like (module docstring); the same `seed` gives the same vectors."""
    base = np.random.default_rng(STRUCTURE_SEED)

    def directions(*shape: int) -> np.ndarray:
        return base.standard_normal((*shape, dim)) / np.sqrt(dim)

    shared, topic, subtopic = directions(), directions(topics), directions(topics * subtopics)
    spread = directions(topics * subtopics, rank)
    rng = np.random.default_rng(seed)
    out = np.empty((n, dim), dtype=np.float32)
    for start in range(0, n, 2048):  # in blocks: the low-rank spread is rows x rank x dim at once
        k = rng.integers(0, topics * subtopics, min(2048, n - start))
        z = rng.standard_normal((len(k), rank)) / np.sqrt(rank)
        x = 0.55 * shared + topic[k // subtopics] + 0.7 * subtopic[k] + np.einsum("nr,nrd->nd", z, spread[k])
        x += 0.45 * rng.standard_normal((len(k), dim)) / np.sqrt(dim)
        out[start : start + len(k)] = x / np.linalg.norm(x, axis=1, keepdims=True)
    return out


def exact_top_k(corpus: np.ndarray, queries: np.ndarray, k: int) -> np.ndarray:
    """Row indexes of each query's k highest cosines (unit vectors: dot products), best first."""
    scores = queries @ corpus.T
    top = np.argpartition(-scores, k, axis=1)[:, :k]
    order = np.argsort(-np.take_along_axis(scores, top, axis=1), axis=1)
    return np.take_along_axis(top, order, axis=1)


def recall_at_k(found: Sequence[Sequence], exact: Sequence[Sequence], k: int) -> float:
    """Mean fraction of each query's exact top k among its first k results (rows or ids; 0.0 for no queries)."""
    if len(exact) == 0:
        return 0.0
    return float(np.mean([len(set(f[:k]) & set(np.asarray(e[:k]).tolist())) / k for f, e in zip(found, exact)]))


def chunks_for(start: int, n: int, langs: tuple[str, ...] = ("en", "de", "fr")) -> list[common_pb2.Chunk]:
    """One single-chunk document per row, doc ids `d<row>`, with a short text and a lang to filter on."""
    return [
        common_pb2.Chunk(chunk_id=f"d{i}#0", doc_id=f"d{i}", position=0, title=f"title {i}",
                         text=f"passage {i} " + "lorem ipsum " * 40, content_hash="h",
                         metadata={"lang": langs[i % 3]})
        for i in range(start, start + n)
    ]


def row_of(point) -> int:
    return int(point.payload["doc_id"][1:])


def rss_mib() -> tuple[float, float]:
    """(current, peak) resident set size of this process in MiB."""
    current = next(int(line.split()[1]) for line in Path("/proc/self/status").read_text().splitlines()
                   if line.startswith("VmRSS:"))
    return current / 1024, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def timed_searches(store: EdgeStore, queries: np.ndarray,
                         filters: list) -> tuple[list[float], list[list[int]]]:
    """One search of limit 100 (a leg's depth) per query, one at a time: latencies (ms) and hit rows."""
    latencies, found = [], []
    for q in queries:
        started = time.perf_counter()
        (hits,) = await store.search("bench", q[None, :], 100, filters)
        latencies.append((time.perf_counter() - started) * 1000)
        found.append([row_of(p) for p in hits])
    return latencies, found


async def measure(points: int, dim: int, queries: int, path: Path, settings: VectorSettings) -> dict:
    corpus = clustered_unit_vectors(points, dim, seed=0)
    query_vectors = clustered_unit_vectors(queries, dim, seed=1)
    out: dict = {"points": points, "dim": dim, "queries": queries, "hnsw_m": settings.hnsw_m,
                 "hnsw_ef_construct": settings.hnsw_ef_construct, "hnsw_ef": settings.hnsw_ef,
                 "indexed_fields": settings.indexed_fields}

    out["rss_before_store_mib"] = round(rss_mib()[0])  # the vectors above, numpy, protobuf, qdrant_edge
    store = EdgeStore(path=path, dim=dim, settings=settings, quiet_s=3600)  # index build timed on its own
    writing = 0.0
    for start in range(0, points, 1024):  # as the vector service gets them: batches of chunks
        chunks = chunks_for(start, min(1024, points - start))
        started = time.perf_counter()
        await store.write("bench", chunks, corpus[start : start + len(chunks)])
        writing += time.perf_counter() - started
    out["upsert_points_per_s"] = round(points / writing)

    started = time.perf_counter()
    for q in query_vectors[:20]:
        await store.search("bench", q[None, :], 100, [])
    out["search_before_index_ms_mean"] = round((time.perf_counter() - started) / 20 * 1000, 2)

    started = time.perf_counter()
    await store.optimize("bench")
    out["index_build_s"] = round(time.perf_counter() - started, 1)
    out["stats"] = (await store.stats("bench")).details

    latencies, found = await timed_searches(store, query_vectors, [])
    out["search_limit100_ms_p50"] = round(float(np.percentile(latencies, 50)), 2)
    out["search_limit100_ms_p99"] = round(float(np.percentile(latencies, 99)), 2)
    out["recall_at_10"] = round(recall_at_k(found, exact_top_k(corpus, query_vectors, 10), 10), 4)
    first = found[0]

    de_rows = np.arange(1, points, 3)  # chunks_for: row i has lang ("en", "de", "fr")[i % 3]
    de_filter = [common_pb2.MetadataFilter(field="lang", equals="de")]
    latencies, found = await timed_searches(store, query_vectors, de_filter)
    out["filtered_search_limit100_ms_p50"] = round(float(np.percentile(latencies, 50)), 2)
    out["filtered_search_limit100_ms_p99"] = round(float(np.percentile(latencies, 99)), 2)
    exact_de = de_rows[exact_top_k(corpus[de_rows], query_vectors, 10)]
    out["filtered_recall_at_10"] = round(recall_at_k(found, exact_de, 10), 4)

    current, peak = rss_mib()
    out["rss_mib"], out["peak_rss_mib"] = round(current), round(peak)
    out["data_vectors_mib"] = round(points * dim * 4 / 2**20)
    out["disk_mib"] = round(sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 2**20)
    started = time.perf_counter()
    await store.close()
    out["close_s"] = round(time.perf_counter() - started, 2)

    reopened = EdgeStore(path=path, dim=dim, settings=settings, quiet_s=3600)
    started = time.perf_counter()
    (hits,) = await reopened.search("bench", query_vectors[:1], 100, [])
    out["reopen_and_first_search_s"] = round(time.perf_counter() - started, 2)
    out["reopened_same_hits"] = [row_of(p) for p in hits] == first
    await reopened.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--points", type=int, default=100_000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--hnsw-ef", type=int, default=128)
    parser.add_argument("--no-lang-index", action="store_true",
                        help="no payload index on meta.lang (the filtered searches' field)")
    parser.add_argument("--path", type=Path, default=None, help="shard directory (default: a temporary one)")
    args = parser.parse_args()
    settings = VectorSettings(hnsw_ef=args.hnsw_ef, indexed_fields=[] if args.no_lang_index else ["lang"])
    root = args.path or Path(tempfile.mkdtemp(prefix="edge-bench-"))
    try:
        print(json.dumps(asyncio.run(measure(args.points, args.dim, args.queries, root, settings)), indent=2))
    finally:
        if args.path is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
