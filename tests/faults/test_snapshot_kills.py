"""kill -9 of a process taking or restoring a snapshot (the gateway, the BM25 or the vector service) at 10 random
points: no half-made collection ever serves, and the same call run again finishes (docs/operations.md).

Each round starts a create or a restore, kills one part after a random delay within the call's measured
duration, and while supervisord brings the part back looks at the target: a restore's target is NOT_FOUND or
whole in both stores, never part of it. Then the same call is sent until it succeeds, and what it made is
compared id by id and hash by hash with the source."""

from __future__ import annotations

import random
import threading
import time

import grpc
import pytest
from stacks import client_environment, gateway_client, store_call
from test_ingest_kills import wait_until_serving

from hybridsearch.client import GatewayClient, HybridSearchError, NotFound, document
from hybridsearch.v1 import common_pb2

pytestmark = pytest.mark.stack
SOURCE = "snapshot-kills"
ROUNDS = 10
PARTS = ("gateway", "bm25", "vector")
RETRY_FOR_S = 120


def stored(stack, store: str, collection: str) -> dict[str, str]:
    pages = store_call(stack, store, "ListDocuments", common_pb2.ListDocumentsRequest(collection=collection),
                       stream=True)
    return {d.doc_id: d.content_hash for page in pages for d in page.documents}


def until_done(call, what: str):
    """`call()` again until it answers (a part coming back: UNAVAILABLE; a dead holder's hold: a moment)."""
    end = time.monotonic() + RETRY_FOR_S
    while True:
        try:
            return call()
        except HybridSearchError as err:
            if time.monotonic() > end:
                raise AssertionError(f"{what} did not finish: {err}") from err
            time.sleep(0.5)


def never_partial(stack, client: GatewayClient, target: str, expected: dict[str, str], again: bool = False) -> str:
    """What the target looks like from outside: "missing", or "whole" (both stores hold exactly the source)."""
    try:
        stats = client.stats(target, timeout=10)
        if any(s.engine == "unavailable" for s in stats.stores):
            return "unavailable"  # a store is down: its part cannot be looked at now
        bm25, vector = stored(stack, "bm25", target), stored(stack, "vector", target)
    except grpc.RpcError as err:
        if isinstance(err, NotFound):
            seen = missing(client, target)
            if seen == "answered":  # the restore finished between the two calls: look again, once
                assert not again, f"{target}: Stats NOT_FOUND but a search answered, twice"
                return never_partial(stack, client, target, expected, again=True)
            return seen
        return "unavailable"  # the gateway or a store coming back
    assert {s.documents for s in stats.stores} == {len(expected)}, stats
    assert bm25 == vector == expected
    return "whole"


def missing(client: GatewayClient, target: str) -> str:
    """A search's view of a target Stats did not find: "missing", "unavailable", or "answered" (the restore
    finished since; never_partial then checks it whole)."""
    try:
        client.search("lighthouse", collection=target, effort="fast", timeout=10)
    except NotFound:
        return "missing"
    except HybridSearchError:
        return "unavailable"
    return "answered"


def test_kills_while_snapshots_are_taken_and_restored_leave_nothing_half_made(fault_stack, tmp_path):
    stack, rng = fault_stack, random.Random(32)
    repository = str(tmp_path / "repo")
    with client_environment(stack), gateway_client(stack) as client:
        client.upsert(SOURCE, [document(f"k-{i:04d}", f"Lighthouse log {i}: the keeper noted the tide and the "
                                                      f"wind, entry {i}. " * 6, title=f"Log {i}") for i in range(400)])
        expected = stored(stack, "bm25", SOURCE)
        started = time.monotonic()
        base = client.create_snapshot(SOURCE, repository)
        create_s = time.monotonic() - started
        started = time.monotonic()
        client.restore_snapshot(base.location, "snapshot-kills-base")
        restore_s = time.monotonic() - started
        assert never_partial(stack, client, "snapshot-kills-base", expected) == "whole"
    rounds = []
    for i in range(ROUNDS):
        kind, part = ("create", "restore")[i % 2], PARTS[rng.randrange(len(PARTS))]
        delay = rng.uniform(0, create_s if kind == "create" else restore_s)
        target = f"snapshot-kills-{i}"
        result: list = []

        def call(kind=kind, target=target):
            with client_environment(stack), gateway_client(stack) as c:
                if kind == "create":
                    return c.create_snapshot(SOURCE, repository, timeout=120)
                return c.restore_snapshot(base.location, target, timeout=120)

        def run(call=call, result=result):
            try:
                result.append(call())
            except HybridSearchError as err:
                result.append(err)

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        time.sleep(delay)
        stack.kill(part)
        seen, looks = set(), 0
        with client_environment(stack), gateway_client(stack) as client:
            while thread.is_alive() or looks < 10:  # what a client sees meanwhile, as the part comes back
                looks += 1
                if kind == "restore":
                    seen.add(never_partial(stack, client, target, expected))
                else:
                    seen.add("create")
                time.sleep(0.2)
            thread.join(150)
            wait_until_serving(stack, parts=PARTS)
            first = result[0] if result else None
            again = until_done(call, f"{kind} {target}")  # the same call, run again, finishes
            if kind == "restore":
                assert never_partial(stack, client, target, expected) == "whole"
            else:
                check = f"{target}-check"
                until_done(lambda: client.restore_snapshot(again.location, check), f"restore of {again.location}")
                assert never_partial(stack, client, check, expected) == "whole"
            # Every snapshot the repository lists is whole: a create killed half-way left no manifest.
            for listed in client.list_snapshots(SOURCE, repository).snapshots:
                assert listed.documents == len(expected)
        rounds.append((kind, part, round(delay, 2), type(first).__name__, sorted(seen)))
    print("\n".join(f"{k} killed {p} after {d}s: first call {f}, seen {s}" for k, p, d, f, s in rounds))
    print(f"create {create_s:.1f}s, restore {restore_s:.1f}s of {len(expected)} documents")
    assert {p for _, p, _, _, _ in rounds} == set(PARTS)
