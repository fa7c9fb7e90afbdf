"""The re-index figures of docs/operations.md against a running stack: COLLECTION (SciFact, indexed with the
deployment's embedder) re-indexed to EMBEDDER by `hybridsearch reindex --check` while a searcher sends 20
searches/s and a writer 20 documents/s (new ones and changes, one at a time); the writes go on a while after the
switch; then, id by id in both stores, both generations against what the writer acknowledged; then `alias
rollback`, and generation 0's answers (read by its name just before) against the alias's after it.

    python docs/perf/reindex-run.py COLLECTION BEIR_FOLDER EMBEDDER OUT.json
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import threading
import time

from hybridsearch.client import GatewayClient, HybridSearchError, document
from hybridsearch.config.settings import get_settings
from hybridsearch.runtime.server import internal_channel
from hybridsearch.corpus import load_judged_queries
from hybridsearch.v1 import bm25_pb2_grpc, common_pb2, vector_pb2_grpc

COLLECTION, FOLDER, EMBEDDER, OUT = sys.argv[1:5]
RATE = 20.0
HS = os.environ.get("HS", "hybridsearch")
queries, _ = load_judged_queries(__import__("pathlib").Path(FOLDER))
TEXTS = list(queries.values())
# What the writer writes: no judged query's words (the live documents are not judged; were they the queries'
# texts, they would rank first for them and pull the nDCG of both generations down)
LIVE = ("the harbour log notes the tide at dawn", "a recipe for rye bread with caraway",
        "the choir rehearses on Thursday evenings", "minutes of the allotment committee")


def paced(rate: float, stop: threading.Event, act) -> None:
    start, i = time.monotonic(), 0
    while not stop.is_set() and i < 100_000:
        wait = start + i / rate - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        act(i)
        i += 1


class Writer(threading.Thread):
    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.stop, self.errors, self.present, self.acked = threading.Event(), [], set(), 0

    def run(self) -> None:
        client = GatewayClient()

        def write(i: int) -> None:
            key = f"live-{i // 4:05d}"  # each live document written, then changed three times
            try:
                client.upsert(COLLECTION, [document(key, f"Live note {i}: {LIVE[i % len(LIVE)]} (version {i % 4})",
                                                   title=f"Live {i // 4}")], timeout=60)
            except HybridSearchError as err:
                self.errors.append(f"{err.code().name}: {err.message}")
                return
            self.present.add(key)
            self.acked += 1

        paced(RATE, self.stop, write)


class Searcher(threading.Thread):
    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.stop, self.errors, self.ms = threading.Event(), [], []

    def run(self) -> None:
        client = GatewayClient()

        def search(i: int) -> None:
            started = time.perf_counter()
            try:
                client.search(TEXTS[i % len(TEXTS)], collection=COLLECTION, effort="fast", timeout=30)
                self.ms.append((time.perf_counter() - started) * 1000)
            except HybridSearchError as err:
                self.errors.append(f"{err.code().name}: {err.message}")

        paced(RATE, self.stop, search)


def listing(store: str, collection: str) -> dict[str, str]:
    async def run():
        ep = get_settings().endpoints
        channel = internal_channel(ep.addr(store))
        stub = (bm25_pb2_grpc.Bm25ServiceStub if store == "bm25" else vector_pb2_grpc.VectorServiceStub)(channel)
        out = {}
        async for page in stub.ListDocuments(common_pb2.ListDocumentsRequest(collection=collection), timeout=600):
            out.update((d.doc_id, d.content_hash) for d in page.documents)
        await channel.close()
        return out
    return asyncio.run(run())


def answers(client: GatewayClient, collection: str) -> list[list[str]]:
    return [[h.doc_id for h in client.search(q, collection=collection, effort="fast", rerank=False, top_k=10).hits]
            for q in TEXTS[:50]]


def main() -> None:
    client = GatewayClient()
    base = {s: set(listing(s, COLLECTION)) for s in ("bm25", "vector")}
    writer, searcher = Writer(), Searcher()
    searcher.start()
    writer.start()
    started = time.monotonic()
    cli = subprocess.run([HS, "reindex", "-c", COLLECTION, "--embedder", EMBEDDER, "--check", FOLDER,
                          "--check-modes", "vector,hybrid", "--max-loss", "1"], capture_output=True, text=True,
                         env={**os.environ, "COLUMNS": "200"})
    reindex_s = time.monotonic() - started
    time.sleep(20)  # writes and searches go on after the switch
    writer.stop.set()
    writer.join(120)
    time.sleep(1)
    present = base["bm25"] | writer.present
    generations = {}
    info = client.get_alias(COLLECTION)
    for g in info.generations:
        held = {s: listing(s, g.stored_name) for s in ("bm25", "vector")}
        generations[g.stored_name] = {
            "role": g.role, "embedder": g.embedder, "documents": {s: len(h) for s, h in held.items()},
            "holds_exactly_the_acknowledged": all(set(h) == present for h in held.values()),
            "stores_agree_hash_by_hash": held["bm25"] == held["vector"]}
    g0 = answers(client, f"{COLLECTION}.g0")
    switched = answers(client, COLLECTION)
    rolled = subprocess.run([HS, "alias", "rollback", COLLECTION], capture_output=True, text=True)
    time.sleep(1.5)
    after = answers(client, COLLECTION)
    searcher.stop.set()
    searcher.join(60)
    ms = sorted(searcher.ms)
    out = {
        "collection": COLLECTION, "embedder": EMBEDDER, "reindex_cli": (cli.stdout + cli.stderr).splitlines(),
        "reindex_rc": cli.returncode, "reindex_and_check_seconds": round(reindex_s, 1),
        "writes": {"acknowledged": writer.acked, "documents_written": len(writer.present), "errors": writer.errors},
        "searches": {"answered": len(ms), "failed": len(searcher.errors), "errors": searcher.errors[:5],
                     "p50_ms": round(statistics.median(ms), 1) if ms else None,
                     "p99_ms": round(ms[int(0.99 * (len(ms) - 1))], 1) if ms else None},
        "generations": generations,
        "rollback": {"cli": (rolled.stdout + rolled.stderr).strip(), "rc": rolled.returncode,
                     "answers_equal_generation_0s": after == g0,
                     "answers_differed_while_switched": sum(a != b for a, b in zip(switched, g0))},
    }
    json.dump(out, open(OUT, "w"), indent=1)
    print(json.dumps(out, indent=1))


main()
