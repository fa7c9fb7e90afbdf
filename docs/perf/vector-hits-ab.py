"""The vector service's answer building outside the embedding, old against new in one process, query by
query alternated: the store's search (qdrant-edge, 100 hits, whole payloads), the LEG_VECTOR list
(VectorEngine._ranked), trim_texts and the response's serialisation, with every hit built with its text
and then trimmed (old: text_depth not passed down) or only the first `--depth` (new). Checks both give
the same bytes. Needs an indexed SciFact copy: a qdrant-edge folder (a stack's var/qdrant-edge, copied).

    .venv/bin/python docs/perf/vector-hits-ab.py QDRANT_EDGE_DIR [--collection bench-scifact-8c1bc262]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from pathlib import Path

from hybridsearch.config.settings import get_settings
from hybridsearch.storage.store_servicer import trim_texts
from hybridsearch.v1 import common_pb2
from hybridsearch.vector.edge import EdgeStore
from hybridsearch.vector.embedder import QueryEncoder
from hybridsearch.vector.dense import VectorEngine


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("path", type=Path)
    parser.add_argument("--collection", default="bench-scifact-8c1bc262")
    parser.add_argument("--data", type=Path, default=Path("../shared/datasets/scifact"))
    parser.add_argument("--depth", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    settings = get_settings()
    store = EdgeStore(path=args.path, dim=384, settings=settings.vector)
    encoder = QueryEncoder(settings.vector.embedder, settings.vector.max_seq_length)
    queries = [json.loads(line)["text"] for line in open(args.data / "queries.jsonl")][:300]
    vectors = await encoder.embed(queries)

    async def answer(v, depth: int) -> bytes:
        (points,) = await store.search(args.collection, v[None, :], 100, [])
        ranked = VectorEngine._ranked(common_pb2.QUERY_KIND_ORIGINAL, "q", points, (), depth)
        return common_pb2.LegSearchResponse(engine="x", lists=trim_texts([ranked], args.depth)).SerializeToString()

    for v in vectors:
        assert await answer(v, args.depth) == await answer(v, 0), "the hits differ"
    for r in range(args.rounds):
        spent = {args.depth: 0.0, 0: 0.0}
        for i, v in enumerate(vectors):
            for depth in (args.depth, 0) if i % 2 else (0, args.depth):
                t = time.process_time()
                await answer(v, depth)
                spent[depth] += time.process_time() - t
        new, old = (spent[d] / len(vectors) * 1000 for d in (args.depth, 0))
        print(f"round {r + 1}: new {new:.2f} ms, old {old:.2f} ms per search, new/old {new / old:.2f}")
    print(f"responses identical for {len(vectors)} queries")
    await store.close()


if __name__ == "__main__":
    asyncio.run(main())
