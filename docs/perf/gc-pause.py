"""What the garbage collector costs the gateway's process: the gateway's query path in this process (QueryPath over
channels to a running stack, as bm25-only-split.py), N answers of a mode with every collection timed by generation,
then one full collection timed, with the set-up's heap left as it is and frozen (runtime.heap) in two fresh processes.

    HYBRIDSEARCH_DATA_DIR=... .venv/bin/python docs/perf/gc-pause.py COLLECTION [--mode fast] [--queries 300]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import subprocess
import sys
import time
from pathlib import Path

QUERIES = Path(__file__).resolve().parents[2].parent / "shared" / "datasets" / "scifact" / "queries.jsonl"


async def probe(collection: str, mode: str, queries: list[str], freeze: bool) -> None:
    from hybridsearch.config.settings import Settings
    from hybridsearch.gateway.backends import Backends
    from hybridsearch.gateway.query.deadline import Deadline
    from hybridsearch.gateway.query.path import QueryPath
    from hybridsearch.gateway.query.report import Report
    from hybridsearch.gateway.query.request import plan_search
    from hybridsearch.reranker.client import RerankerClient
    from hybridsearch.runtime.heap import freeze_startup_heap
    from hybridsearch.runtime.server import internal_channel
    from hybridsearch.tools.perf.hops import STUBS
    from hybridsearch.tools.perf.speed import SPEED_MODES

    settings = Settings()
    channels = {name: internal_channel(settings.endpoints.addr(name)) for name in STUBS}
    backends = Backends(**{n: STUBS[n](c) for n, c in channels.items()}, reranker=RerankerClient(settings.rerank),
                        channels=list(channels.values()))
    path = QueryPath(settings, backends)

    async def answer(query: str) -> None:
        await path.answer(plan_search(SPEED_MODES[mode].request(query, collection, 10), settings), Deadline(30.0),
                          Report())
    for query in queries[:20]:
        await answer(query)
    tracked = len(gc.get_objects())
    frozen = freeze_startup_heap() if freeze else 0
    pauses: dict[int, list[float]] = {0: [], 1: [], 2: []}
    started: list[float] = []

    def timed(phase: str, info: dict) -> None:
        if phase == "start":
            started.append(time.perf_counter())
        else:
            pauses[info["generation"]].append((time.perf_counter() - started.pop()) * 1e3)
    gc.callbacks.append(timed)
    for query in queries:
        await answer(query)
    gc.callbacks.remove(timed)
    t = time.perf_counter()
    gc.collect()
    full = (time.perf_counter() - t) * 1e3
    label = "frozen" if freeze else "as it is"
    print(f"{mode}, set-up heap {label} ({tracked} objects tracked, {frozen} frozen): over {len(queries)} answers "
          + ", ".join(f"gen {g} {len(p)} collections {sum(p):.1f} ms (max {max(p, default=0):.2f})"
                      for g, p in pauses.items()) + f"; then one full collection {full:.1f} ms")
    await backends.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("collection")
    parser.add_argument("--mode", default="fast")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--freeze", action="store_true", help=argparse.SUPPRESS)  # one probe, in its own process
    parser.add_argument("--probe", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.probe:
        queries = [json.loads(line)["text"] for line in QUERIES.open()][:args.queries]
        asyncio.run(probe(args.collection, args.mode, queries, args.freeze))
        return
    for freeze in ([], ["--freeze"]):  # each in a fresh process: a heap frozen once stays frozen
        subprocess.run([sys.executable, __file__, args.collection, "--mode", args.mode, "--queries",
                        str(args.queries), "--probe", *freeze], check=True)


if __name__ == "__main__":
    main()
