"""Nothing acknowledged is lost (issue 16, item 3): a bulk upsert of 20,000 documents while the gateway,
then the BM25 service, then the vector service are killed (-9) and brought back by supervisord; then a
bulk delete with the same kills. The writer retries a batch until it is acknowledged, as a client
should (a refused or failed batch says "retry is safe"). Afterwards every acknowledged document is in
both stores with the content of its last acknowledged write, and no acknowledged delete left a trace,
checked against each store directly (ContentHashes on the internal services)."""

from __future__ import annotations

import asyncio
import random
import threading
import time

import grpc
import pytest

from hybridsearch.text.chunking import content_hash
from hybridsearch.runtime.server import insecure_channel
from hybridsearch.tools.perf.load.calls import ChannelPool
from hybridsearch.v1 import bm25_pb2_grpc, common_pb2, ingest_pb2, vector_pb2_grpc

pytestmark = pytest.mark.stack
COLLECTION = "bulk"
DOCUMENTS, BATCH = 20_000, 250
KILLS = ("gateway", "bm25", "vector")  # one each, at 20%, 50% and 90% of the batches (the last among the updates)
WORDS = "ranked fusion lexical dense vector passage query index segment shard replica token stem".split()


def document(i: int, version: int) -> ingest_pb2.Document:
    rng = random.Random(i * 10 + version)
    return ingest_pb2.Document(id=f"doc-{i}", title=f"doc {i} v{version}",
                               text=" ".join(rng.choice(WORDS) for _ in range(8)), metadata={"v": str(version)})


def expected_hash(doc: ingest_pb2.Document) -> str:
    return content_hash(doc.title, doc.text, dict(doc.metadata))


async def acknowledged(stub_call, request, log: list[str]) -> None:
    """Sends until acknowledged; every refusal is logged by code."""
    for attempt in range(200):
        try:
            await stub_call(request, timeout=60)
            return
        except grpc.aio.AioRpcError as err:
            log.append(err.code().name)
            await asyncio.sleep(min(2.0, 0.05 * 2 ** min(attempt, 5)))
    raise AssertionError(f"not acknowledged after 200 tries: {log[-5:]}")


def kill_at(stack, batches: list, done: list[int], kills: tuple[str, ...], killed: list[str]) -> threading.Thread:
    """A thread that kills each part once the writer has acknowledged its share of the batches."""
    marks = [int(len(batches) * f) for f in (0.2, 0.5, 0.9)][: len(kills)]

    def run() -> None:
        for part, mark in zip(kills, marks):
            while done[0] < mark:
                time.sleep(0.02)
            stack.kill(part)
            killed.append(part)
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


async def write_all(stack, requests, call_name: str, kills=KILLS) -> tuple[list[str], list[str]]:
    pool = ChannelPool(stack.settings.endpoints.addr("gateway"), size=1)
    refusals: list[str] = []
    done, killed = [0], []
    thread = kill_at(stack, requests, done, kills, killed)
    try:
        for request in requests:
            await acknowledged(getattr(pool.ingest(), call_name), request, refusals)
            done[0] += 1
    finally:
        await pool.close()
    thread.join(120)
    return refusals, killed


def stored_hashes(stack, store: str, ids: list[str]) -> dict[str, str]:
    async def run() -> dict[str, str]:
        channel = insecure_channel(f"127.0.0.1:{getattr(stack.settings.endpoints, store + '_port')}")
        stub = (bm25_pb2_grpc.Bm25ServiceStub if store == "bm25" else vector_pb2_grpc.VectorServiceStub)(channel)
        out: dict[str, str] = {}
        for start in range(0, len(ids), 1000):
            reply = await stub.ContentHashes(common_pb2.ContentHashesRequest(collection=COLLECTION, doc_ids=ids[start:start + 1000]),
                                             timeout=60)
            out.update(reply.hashes)
        await channel.close()
        return out
    return asyncio.run(run())


def wait_until_serving(stack, parts=KILLS, timeout_s=120) -> None:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        try:
            if all(stack.ready(p) for p in parts):
                return
        except Exception:
            pass
        time.sleep(0.2)
    raise AssertionError("parts not back")


def reconciled(stack) -> tuple[dict, dict]:
    """Reconcile's findings before and after its repair (hybridsearch.reconcile)."""
    from hybridsearch.reconcile.run import Reconciler

    async def run() -> tuple[dict, dict]:
        reconciler = Reconciler(stack.settings)
        try:
            return (await reconciler.run(COLLECTION)).row(), (await reconciler.run(COLLECTION, dry_run=True)).row()
        finally:
            await reconciler.close()
    return asyncio.run(run())


def test_acknowledged_writes_and_deletes_survive_kills(fault_stack):
    # Version 1 of every document, then version 2 of every fifth: the last acknowledged write must win.
    latest = {i: document(i, 1) for i in range(DOCUMENTS)}
    batches = [[latest[i] for i in range(s, min(s + BATCH, DOCUMENTS))] for s in range(0, DOCUMENTS, BATCH)]
    updates = [document(i, 2) for i in range(0, DOCUMENTS, 5)]
    for doc in updates:
        latest[int(doc.id.split("-")[1])] = doc
    batches += [updates[s:s + BATCH] for s in range(0, len(updates), BATCH)]
    requests = [ingest_pb2.UpsertRequest(collection=COLLECTION, documents=b) for b in batches]

    started = time.monotonic()
    refusals, killed = asyncio.run(write_all(fault_stack, requests, "Upsert"))
    took = time.monotonic() - started
    wait_until_serving(fault_stack)
    ids = [f"doc-{i}" for i in range(DOCUMENTS)]
    expected = {f"doc-{i}": expected_hash(d) for i, d in latest.items()}
    for store in ("bm25", "vector"):
        hashes = stored_hashes(fault_stack, store, ids)
        missing = [i for i in ids if i not in hashes]
        stale = [i for i in ids if i in hashes and hashes[i] != expected[i]]
        print(f"\nupsert: {store}: {len(hashes)} of {len(ids)} stored, missing {len(missing)}, stale {len(stale)}")
        assert not missing and not stale, (missing[:5], stale[:5])
    print(f"upsert: {len(requests)} batches ({DOCUMENTS} documents + {len(updates)} updates) in {took:.0f} s; "
          f"killed {killed}; refusals before acknowledgement: {dict((c, refusals.count(c)) for c in set(refusals))}")
    assert killed == list(KILLS)

    # Deletes: every third document, in batches, with the same kills.
    gone = ids[::3]
    deletes = [ingest_pb2.DeleteRequest(collection=COLLECTION, ids=gone[s:s + 500]) for s in range(0, len(gone), 500)]
    refusals, killed = asyncio.run(write_all(fault_stack, deletes, "Delete"))
    wait_until_serving(fault_stack)
    kept = [i for i in ids if i not in set(gone)]
    for store in ("bm25", "vector"):
        hashes = stored_hashes(fault_stack, store, ids)
        resurrected = [i for i in gone if i in hashes]
        lost = [i for i in kept if hashes.get(i) != expected[i]]
        print(f"delete: {store}: {len(resurrected)} deleted documents still stored, {len(lost)} kept ones changed")
        assert not resurrected and not lost
    print(f"delete: {len(deletes)} batches, killed {killed}, refusals {dict((c, refusals.count(c)) for c in set(refusals))}")

    # Whatever unacknowledged writes left behind, reconcile finds and repairs; afterwards nothing drifts.
    before, after = reconciled(fault_stack)
    print(f"reconcile: found {before['found']}, repaired {before['repaired']}; then {after['found']}")
    assert after["found"]["consistent"] == len(kept) and after["found"]["missing"] == after["found"]["diverged"] == 0
