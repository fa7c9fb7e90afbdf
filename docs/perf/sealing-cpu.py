"""The gateway's CPU to prepare SciFact's writes for the stores, plain vs sealed vs sealed with hashed terms
(issue 26): `gateway.ingest.chunks.store_requests` (chunking, sealing, keyed hashes, hashed terms) over the whole
corpus, in process, no stores and no embedding, the three variants alternated ROUNDS times; CPU seconds
(process_time) per variant and per chunk. What it isolates: the part of an Upsert that sealing adds, which
the stack's index throughput figure (docs/perf/sealed-cost.sh) measures only under the embedding's noise.
And the query side's open: `CollectionSeal.open_content` of one chunk (what the gateway pays per hit shown
or reranked).

    .venv/bin/python docs/perf/sealing-cpu.py [--rounds 3] [--json-out FILE]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from hybridsearch.config.collections import CollectionConfig, SealedTerms
from hybridsearch.config.settings import get_settings
from hybridsearch.security.hashed_terms import HashedTerms
from hybridsearch.security.sealing import CollectionSeal
from hybridsearch.security.keys_file import create_collection_key, parse_keys_file
from hybridsearch.corpus import beir_corpus_file, read_beir_corpus
from hybridsearch.gateway.ingest.chunks import store_requests


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[3] / "shared/datasets/scifact")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json-out", type=Path)
    args = parser.parse_args()
    settings = get_settings()
    docs = list(read_beir_corpus(beir_corpus_file(args.data)))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "keys.yaml"
        create_collection_key(path, "c")
        keys = parse_keys_file(path.read_text(), str(path))["c"]
    seals = {"plain": None,
             "sealed": CollectionSeal("c", keys, CollectionConfig(sealed=True)),
             "sealed, hashed terms": CollectionSeal("c", keys, CollectionConfig(sealed=True, sealed_terms=SealedTerms.HASHED))}
    terms = HashedTerms(settings)
    seconds: dict[str, list[float]] = {name: [] for name in seals}
    chunks = 0
    for _ in range(args.rounds):
        for name, seal in seals.items():
            start = time.process_time()
            for i in range(0, len(docs), 100):
                bm25, vector = store_requests("c", docs[i:i + 100], settings, seal, terms)
                chunks += len(bm25.chunks) if name == "plain" else 0
            seconds[name].append(time.process_time() - start)
    chunks //= args.rounds
    sealed_chunk = store_requests("c", docs[:1], settings, seals["sealed"])[1].chunks[0]
    start, n = time.process_time(), 2000
    for _ in range(n):
        seals["sealed"].open_content(sealed_chunk.chunk_id, sealed_chunk.sealed)
    open_us = (time.process_time() - start) / n * 1e6
    report = {"documents": len(docs), "chunks": chunks, "rounds": args.rounds,
              "cpu_s": {k: [round(v, 3) for v in vs] for k, vs in seconds.items()},
              "us_per_chunk_median": {k: round(statistics.median(vs) / chunks * 1e6, 1) for k, vs in seconds.items()},
              "open_content_us": round(open_us, 1)}
    print(json.dumps(report, indent=1))
    if args.json_out:
        args.json_out.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    sys.exit(main())
