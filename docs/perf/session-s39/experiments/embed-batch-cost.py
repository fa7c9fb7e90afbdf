"""A query embedding's CPU by how many queries share its run (MiniLM, one onnxruntime thread as the vector service's
query encoder runs it, SciFact's first 240 queries, two rounds): what batching queries across calls could save.
    .venv/bin/python docs/perf/session-s39/experiments/embed-batch-cost.py"""
import json, time
from hybridsearch.config.settings import get_settings
from hybridsearch.vector.embedder import open_embedder
from hybridsearch.vector import e5
s = get_settings()
emb = open_embedder(s.vector.embedder, s.vector.max_seq_length, threads=1, role=e5.Role.QUERY)
qs = [json.loads(line)["text"] for line in open("../shared/datasets/scifact/queries.jsonl")][:240]
for q in qs[:20]:
    emb.embed([q])
for rnd in range(2):
    for b in (1, 2, 3, 4, 8):
        t = time.thread_time()
        for i in range(0, 240, b):
            emb.embed(qs[i:i + b])
        print(f"round {rnd + 1}, {b} a run: CPU a query {(time.thread_time() - t) / 240 * 1000:.3f} ms")
