"""The snapshot figures of docs/operations.md against a running stack: one sequential writer at RATE documents/s
and a searcher (FAST, one worker) run while a snapshot of COLLECTION is taken; writes go on for AFTER seconds and a
second (incremental) snapshot is taken; then the writer stops, the first snapshot is restored under a new name
and checked id by id in both stores against what the writer had acknowledged (a prefix of its documents, every
write acknowledged before the create was sent in it, none sent after it returned), and the search answers'
latencies during the snapshot are set beside those before it.

    python docs/perf/snapshot-run.py COLLECTION REPOSITORY OUT.json [RATE] [AFTER]
"""

from __future__ import annotations

import json
import sys
import threading
import time

from hybridsearch.client import GatewayClient, HybridSearchError, document
from hybridsearch.config.settings import get_settings
from hybridsearch.v1 import bm25_pb2_grpc, common_pb2, vector_pb2_grpc

COLLECTION, REPOSITORY, OUT = sys.argv[1], sys.argv[2], sys.argv[3]
RATE = float(sys.argv[4]) if len(sys.argv) > 4 else 50.0
AFTER = float(sys.argv[5]) if len(sys.argv) > 5 else 30.0
TARGET = f"{COLLECTION}-restored"


def live(i: int):
    return document(f"live-{i:06d}", f"Live write {i}: a note on protein folding and cell signalling, written while "
                    f"the snapshot runs, number {i}.", title=f"Live {i}")


class Writer(threading.Thread):
    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.sent, self.acked, self.errors = [], [], []
        self.stop = threading.Event()

    def run(self) -> None:
        client, i, start = GatewayClient(), 0, time.monotonic()
        while not self.stop.is_set():
            wait = start + i / RATE - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            self.sent.append(time.monotonic())
            try:
                client.upsert(COLLECTION, [live(i)], timeout=60)
            except HybridSearchError as err:
                self.errors.append(str(err))
                return
            self.acked.append(time.monotonic())
            i += 1


class Searcher(threading.Thread):
    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.samples: list[tuple[float, float]] = []  # (start, seconds)
        self.stop, self.errors = threading.Event(), []

    def run(self) -> None:
        client = GatewayClient()
        while not self.stop.is_set():
            started = time.monotonic()
            try:
                client.search("protein folding cell signalling", collection=COLLECTION, effort="fast", timeout=30)
            except HybridSearchError as err:
                self.errors.append(str(err))
            self.samples.append((started, time.monotonic() - started))
            time.sleep(0.05)


def stored(store: str, collection: str) -> dict[str, str]:
    import asyncio

    from hybridsearch.runtime.server import internal_channel

    async def run():
        settings = get_settings()
        channel = internal_channel(settings.endpoints.addr(store))
        stub = (bm25_pb2_grpc.Bm25ServiceStub if store == "bm25" else vector_pb2_grpc.VectorServiceStub)(channel)
        out = {}
        async for page in stub.ListDocuments(common_pb2.ListDocumentsRequest(collection=collection), timeout=600):
            out.update({d.doc_id: d.content_hash for d in page.documents})
        await channel.close()
        return out
    return asyncio.run(run())


def percentiles(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    ordered = sorted(values)
    pick = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000  # noqa: E731
    return {"n": len(values), "p50_ms": round(pick(0.5), 1), "p99_ms": round(pick(0.99), 1),
            "max_ms": round(ordered[-1] * 1000, 1)}


def main() -> None:
    client = GatewayClient()
    base = {s.store: s.documents for s in client.stats(COLLECTION).stores}
    writer, searcher = Writer(), Searcher()
    writer.start()
    searcher.start()
    time.sleep(10)
    before = time.monotonic()
    first = client.create_snapshot(COLLECTION, REPOSITORY, timeout=3600)
    after = time.monotonic()
    time.sleep(AFTER)
    second_started = time.monotonic()
    second = client.create_snapshot(COLLECTION, REPOSITORY, timeout=3600)
    second_ended = time.monotonic()
    writer.stop.set()
    searcher.stop.set()
    writer.join(60)
    searcher.join(60)
    started = time.monotonic()
    restored = client.restore_snapshot(first.location, TARGET, timeout=3600)
    restore_s = time.monotonic() - started
    bm25, vector = stored("bm25", TARGET), stored("vector", TARGET)
    source = stored("bm25", COLLECTION)
    lives = sorted(d for d in bm25 if d.startswith("live-"))
    n = len(lives)
    checks = {
        "stores_agree_id_by_id_and_hash": bm25 == vector,
        "live_writes_are_a_prefix": lives == [live(i).id for i in range(n)],
        "every_write_acked_before_the_create_is_in": sum(t < before for t in writer.acked) <= n,
        "no_write_sent_after_the_create_returned_is_in": n <= sum(t < after for t in writer.sent),
        "the_rest_equals_the_source_as_it_was": {d: h for d, h in bm25.items() if not d.startswith("live-")}
        == {d: h for d, h in source.items() if not d.startswith("live-")},
    }
    during = [s for t, s in searcher.samples if before <= t <= after]
    outside = [s for t, s in searcher.samples if t < before - 0.5 or after + 0.5 < t < second_started]
    result = {
        "collection": COLLECTION, "documents_before": base, "write_rate_per_s": RATE,
        "first": {"seconds": round(after - before, 2), "write_pause_ms": first.write_pause_ms,
                  "documents": first.documents, "chunks": first.chunks, "bytes_total": first.bytes_total,
                  "bytes_new": first.bytes_new, "location": first.location},
        "second": {"seconds": round(second_ended - second_started, 2), "write_pause_ms": second.write_pause_ms,
                   "documents": second.documents, "bytes_total": second.bytes_total, "bytes_new": second.bytes_new},
        "restore": {"seconds": round(restore_s, 2), "bytes_read": restored.bytes_read, "documents": restored.documents},
        "live_writes": {"acknowledged": len(writer.acked), "in_snapshot": n, "errors": writer.errors[:3]},
        "searches_during_create": percentiles(during), "searches_otherwise": percentiles(outside),
        "search_errors": searcher.errors[:3], "checks": checks,
    }
    with open(OUT, "w") as f:
        json.dump(result, f, indent=1)
    print(json.dumps(result, indent=1))
    assert all(checks.values()), checks


if __name__ == "__main__":
    main()
