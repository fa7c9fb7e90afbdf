"""Passage embedding by onnxruntime batch size (vector.batch_size), alternated in one process: the same texts,
64 a call as the gateway's Upsert batches bring them, each batch size in turn per round; CPU and wall
seconds, the ratio to the first size of the same round, and the largest difference between the vectors.

    .venv/bin/python docs/perf/embed-batch-ab.py [--data cacm,cisi,med,cranfield] [--sizes 32,4] [--texts 384]
        [--rounds 2] [--words N: each text cut to its first N words] [--embedder minilm-fp32]
"""

from __future__ import annotations

import argparse
import random
import time
from pathlib import Path

import numpy as np

from hybridsearch.corpus import beir_corpus_file, read_beir_corpus
from hybridsearch.vector.embedder import open_embedder

PER_CALL = 64  # documents per Upsert from `hybridsearch index` / the client (services/client/requests.py)


def texts_of(datasets: list[str], count: int, words: int) -> list[str]:
    texts = [f"{doc.title}\n{doc.text}".strip() for name in datasets
             for doc in read_beir_corpus(beir_corpus_file(Path("../shared/datasets") / name))]
    random.Random(7).shuffle(texts)
    texts = texts[:count]
    return [" ".join(t.split()[:words]) for t in texts] if words else texts


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", default="cacm,cisi,med,cranfield")
    parser.add_argument("--sizes", default="32,4")
    parser.add_argument("--texts", type=int, default=384)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--words", type=int, default=0)
    parser.add_argument("--embedder", default="minilm-fp32")
    args = parser.parse_args()
    texts = texts_of(args.data.split(","), args.texts, args.words)
    sizes = [int(s) for s in args.sizes.split(",")]
    embedders = {size: open_embedder(args.embedder, 256, size) for size in sizes}
    for embedder in embedders.values():
        embedder.embed(texts[:PER_CALL])  # warm
    print(f"{len(texts)} texts of {args.data}{f' cut to {args.words} words' if args.words else ''}, "
          f"{PER_CALL} a call, {args.embedder}")
    reference = None
    for rnd in range(1, args.rounds + 1):
        first = None
        for size in sizes:
            cpu, wall = time.process_time(), time.perf_counter()
            vectors = np.concatenate([embedders[size].embed(texts[i:i + PER_CALL])
                                      for i in range(0, len(texts), PER_CALL)])
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            reference = vectors if reference is None else reference
            first = first or cpu
            print(f"round {rnd} batch {size:>3}: CPU {cpu:6.1f} s ({cpu / first:.2f}x), wall {wall:6.1f} s, "
                  f"max |difference| to the first vectors {np.abs(vectors - reference).max():.1e}", flush=True)


if __name__ == "__main__":
    main()
