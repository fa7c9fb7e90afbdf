"""The engines' payload caches (bm25.payload_cache, vector.payload_cache) in process, on copies of a data dir's
collection (nothing of the data dir is written): SciFact's queries, fresh (each once) in two halves (the cache
filling, then filled), cache off and on alternated twice. BM25: the tantivy collection's search of 100 hits with
their LegHits (text down to 20). Vector: the engine's search of 100 (the query embedding timed apart), LegHits too.

    HYBRIDSEARCH_DATA_DIR=... .venv/bin/python docs/perf/payload-cache.py COLLECTION
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from hybridsearch.bm25.analyzer import EnglishAnalyzer
from hybridsearch.bm25.tantivy_collection import TantivyCollection
from hybridsearch.config.settings import Settings
from hybridsearch.v1 import common_pb2

QUERIES = Path(__file__).resolve().parents[2].parent / "shared" / "datasets" / "scifact" / "queries.jsonl"
FIELDS = ("type", "tags", "path", "modified")


def bm25(folder: Path, queries: list[str]) -> None:
    b = Settings().bm25
    analyzer = EnglishAnalyzer(b.stemmer, b.stopwords)
    for cache in (0, 8192, 0, 8192):
        collection = TantivyCollection(folder, analyzer, b.title_boost, {}, payload_cache=cache)

        def ms(batch: list[str]) -> float:
            started = time.process_time()
            for query in batch:
                collection.search([query], 100, [], FIELDS, False, 20)
            return (time.process_time() - started) / len(batch) * 1000
        half = len(queries) // 2
        print(f"bm25 payload_cache={cache}: {ms(queries[:half]):.3f} ms a search (first half), "
              f"{ms(queries[half:]):.3f} (second half); {len(collection._payloads)} payloads kept")
        collection.writer = None  # its lock on the folder let go: the next round opens it again


async def vector(data: Path, name: str, queries: list[str]) -> None:
    from hybridsearch.vector.dense import VectorEngine

    os.environ["HYBRIDSEARCH_DATA_DIR"] = str(data)
    for cache in (0, 8192, 0, 8192):
        engine = VectorEngine(Settings(vector={"payload_cache": cache, "query_cache_size": 0, "query_cache_redis": False}))

        async def ms(batch: list[str]) -> tuple[float, float]:
            spent = {"embed": 0.0, "engine": 0.0}
            for query in batch:
                timings: dict[str, float] = {}
                await engine.search(name, [common_pb2.LegQuery(text=query, kind=common_pb2.QUERY_KIND_ORIGINAL)], 100,
                                    [], 0, timings, FIELDS, 20)
                for part in spent:
                    spent[part] += timings.get(part, 0.0)
            return spent["engine"] / len(batch), spent["embed"] / len(batch)
        await ms(queries[:5])
        half = len(queries) // 2
        (first, _), (second, embed) = await ms(queries[:half]), await ms(queries[half:])
        print(f"vector payload_cache={cache}: {first:.3f} ms of search a query (first half), {second:.3f} (second "
              f"half; the embedding apart: {embed:.2f} ms)")
        await engine.close()


def main() -> None:
    name = sys.argv[1]
    data = Path(os.environ["HYBRIDSEARCH_DATA_DIR"])
    queries = [json.loads(line)["text"] for line in QUERIES.open()]
    with tempfile.TemporaryDirectory(prefix="payload-cache-") as scratch:
        copy = Path(scratch)
        shutil.copytree(data / "bm25-tantivy" / name, copy / "bm25")
        bm25(copy / "bm25", queries)
        shutil.copytree(data / "qdrant-edge" / name, copy / "qdrant-edge" / name)
        asyncio.run(vector(copy, name, queries))


if __name__ == "__main__":
    main()
