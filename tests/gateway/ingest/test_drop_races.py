"""DropCollection against Upsert of the same collection, at the same moment, through the real stack: every call
answers within seconds with a clear code (no hang, no UNKNOWN), no engine panics, and afterwards both stores
hold the same documents: every write acknowledged after the drop began is readable in both, every write
acknowledged before it is gone from both. Stats of a dropped collection is NOT_FOUND, as the rest is."""

from __future__ import annotations

import asyncio
import random
import time

import grpc
import pytest

from hybridsearch.client import AsyncGatewayClient, HybridSearchError, NotFound, document
from hybridsearch.v1 import common_pb2
from stacks import client_environment, store_call

pytestmark = pytest.mark.stack
ROUNDS = 200
CALL_TIMEOUT_S = 30.0
# What a refused call may answer: the drop's or the write's "retry, it is safe". Never UNKNOWN, INTERNAL or
# DEADLINE_EXCEEDED (a hang).
CLEAR_REFUSALS = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.FAILED_PRECONDITION}


def docs(prefix: str) -> list:
    return [document(f"{prefix}-{i}", f"Race document {prefix} {i}: the drop and the write meet here, "
                     f"paragraph {i}. " * 8, title=f"{prefix} {i}") for i in range(3)]


def stored(stack, store: str, collection: str) -> set[str]:
    pages = store_call(stack, store, "ListDocuments", common_pb2.ListDocumentsRequest(collection=collection),
                       stream=True)
    return {d.doc_id for page in pages for d in page.documents}


async def outcome(call) -> tuple[str, object]:
    """("ok", the answer) or (the code's name, its message); a call past its deadline reads DEADLINE_EXCEEDED."""
    try:
        return "ok", await call
    except HybridSearchError as err:
        return err.code().name, err.message


async def race_rounds(client: AsyncGatewayClient, rounds: int) -> list[dict]:
    out = []
    rng = random.Random(32)
    for i in range(rounds):
        collection = f"race-{i}"
        await client.upsert(collection, docs("before"), timeout=CALL_TIMEOUT_S)  # acknowledged before the drop
        delay_drop, delay_write = rng.uniform(0, 0.03), rng.uniform(0, 0.03)

        async def drop():
            await asyncio.sleep(delay_drop)
            return await outcome(client.drop_collection(collection, timeout=CALL_TIMEOUT_S))

        async def write():
            await asyncio.sleep(delay_write)
            started = time.monotonic()
            got = await outcome(client.upsert(collection, docs("racing"), timeout=CALL_TIMEOUT_S))
            return got, time.monotonic() - started

        dropped, (written, seconds) = await asyncio.gather(drop(), write())
        out.append({"collection": collection, "drop": dropped, "write": written, "write_s": seconds})
    return out


def test_drops_racing_upserts_lose_no_acknowledged_write(stack):
    with client_environment(stack):
        async def run():
            async with AsyncGatewayClient(stack.settings.endpoints.addr("gateway")) as client:
                return await race_rounds(client, ROUNDS)
        rounds = asyncio.run(run())
    codes = {r[k][0] for r in rounds for k in ("drop", "write")}
    assert codes <= {"ok"} | {c.name for c in CLEAR_REFUSALS}, codes
    assert all(r["drop"][0] == "ok" for r in rounds)  # a drop is never refused by a write
    assert max(r["write_s"] for r in rounds) < 15  # seconds, not a hang
    racing = {d.id for d in docs("racing")}
    for r in rounds:
        bm25, vector = stored(stack, "bm25", r["collection"]), stored(stack, "vector", r["collection"])
        assert bm25 == vector, r  # the stores agree
        assert bm25 in (set(), racing), r  # acknowledged before the drop: gone from both
        if r["write"][0] == "ok":
            # Ordered before the drop (which then counted its 3 documents besides the 3 before): gone with it;
            # ordered after (the drop counted the 3 before only): readable in both.
            assert (r["drop"][1].documents, bm25) in ((6, set()), (3, racing)), r
    for name in ("bm25", "vector", "gateway"):
        log = (stack.log_dir / f"{name}.log").read_text(errors="replace")
        assert "panicked" not in log and "Unexpected [" not in log, f"{name}.log"
    after = sum(r["write"][0] == "ok" and r["drop"][1].documents == 3 for r in rounds)
    print(f"{ROUNDS} rounds: writes acknowledged {sum(r['write'][0] == 'ok' for r in rounds)} ({after} after the "
          f"drop, readable in both), "
          f"refused {sum(r['write'][0] != 'ok' for r in rounds)}; slowest write "
          f"{max(r['write_s'] for r in rounds):.2f} s")
    with client_environment(stack):
        async def cleanup():
            async with AsyncGatewayClient(stack.settings.endpoints.addr("gateway")) as client:
                for r in rounds:
                    await client.drop_collection(r["collection"], timeout=CALL_TIMEOUT_S)
        asyncio.run(cleanup())


def test_stats_of_a_dropped_collection_is_not_found(gateway):
    gateway.upsert("stats-dropped", docs("s"))
    assert {s.documents for s in gateway.stats("stats-dropped").stores} == {3}
    gateway.drop_collection("stats-dropped")
    with pytest.raises(NotFound, match="collection 'stats-dropped' does not exist"):
        gateway.stats("stats-dropped")
    with pytest.raises(NotFound):
        gateway.stats("never-made")
