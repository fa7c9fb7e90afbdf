"""Snapshots through the real stack: taken while a writer and a searcher run, restored under a new name, the
restored collection holding exactly the writes acknowledged before the snapshot's mark (one sequential
writer: a prefix of its documents) in both stores, id by id; a second snapshot writes only what changed; a
corrupted piece or manifest is refused and nothing is restored; a folder and an S3 repository alike."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import grpc
import pytest

from hybridsearch.client import GatewayClient, HybridSearchError, document
from hybridsearch.v1 import common_pb2
from stacks import client_environment, store_call

pytestmark = pytest.mark.stack
SOURCE = "snap-src"
SEEDS = 20


def doc(i: int, round_: str = "w"):
    return document(f"{round_}-{i:05d}", f"Snapshot document {i}: lighthouse keepers log the tide at dawn, "
                                         f"entry {i} of the harbour journal.", title=f"Entry {i}")


def stored(stack, store: str, collection: str) -> dict[str, str]:
    """doc id -> content hash, as one store holds them."""
    pages = store_call(stack, store, "ListDocuments", common_pb2.ListDocumentsRequest(collection=collection),
                       stream=True)
    return {d.doc_id: d.content_hash for page in pages for d in page.documents}


class Writer(threading.Thread):
    """One sequential writer: document i is sent only once i-1 was acknowledged; each send and ack timed."""

    def __init__(self, stack, collection: str) -> None:
        super().__init__(daemon=True)
        self.stack, self.collection = stack, collection
        self.sent: list[float] = []
        self.acked: list[float] = []
        self.stop = threading.Event()
        self.errors: list[str] = []

    def run(self) -> None:
        with client_environment(self.stack):
            client = GatewayClient(self.stack.settings.endpoints.addr("gateway"))
        with client:
            i = 0
            while not self.stop.is_set() and i < 2000:
                self.sent.append(time.monotonic())
                try:
                    client.upsert(self.collection, [doc(i)], timeout=60)
                except HybridSearchError as err:
                    self.errors.append(f"{err.code().name}: {err.message}")
                    return
                self.acked.append(time.monotonic())
                i += 1


class Searcher(threading.Thread):
    def __init__(self, stack, collection: str) -> None:
        super().__init__(daemon=True)
        self.stack, self.collection = stack, collection
        self.stop, self.answers, self.errors = threading.Event(), 0, []

    def run(self) -> None:
        with client_environment(self.stack):
            client = GatewayClient(self.stack.settings.endpoints.addr("gateway"))
        with client:
            while not self.stop.is_set():
                try:
                    client.search("lighthouse tide", collection=self.collection, effort="fast", timeout=30)
                    self.answers += 1
                except HybridSearchError as err:
                    self.errors.append(f"{err.code().name}: {err.message}")


def prefix_of(ids: set[str]) -> int:
    """n when `ids` are exactly w-00000 .. w-(n-1); fails otherwise."""
    n = len(ids)
    assert ids == {doc(i).id for i in range(n)}, sorted(ids)[-5:]
    return n


@pytest.fixture(scope="module")
def admin(stack):
    with client_environment(stack):
        client = GatewayClient(stack.settings.endpoints.addr("gateway"))
    with client:
        yield client


def check_restored(stack, admin, location: str, target: str, writer: Writer, before: float, after: float) -> int:
    """The restore of `location` as `target`: both stores agree id by id and hash by hash, and hold a prefix of
    the writer's documents that includes every write acknowledged before `before` and none sent after `after`."""
    done = admin.restore_snapshot(location, target)
    assert done.collection == target
    bm25, vector = stored(stack, "bm25", target), stored(stack, "vector", target)
    assert bm25 == vector
    seeds = {doc(i, "seed").id for i in range(SEEDS)}
    assert seeds <= set(bm25)  # written before the writer began
    n = prefix_of(set(bm25) - seeds)
    assert sum(1 for t in writer.acked if t < before) <= n  # acknowledged before the mark: in it
    assert n <= sum(1 for t in writer.sent if t < after)  # sent after the snapshot returned: not in it
    assert done.documents == n + SEEDS and {s.documents for s in admin.stats(target).stores} == {n + SEEDS}
    assert admin.search("lighthouse tide", collection=target, effort="fast").hits
    return n


@pytest.mark.parametrize("where", ["folder", "s3"])
def test_a_snapshot_under_writes_and_searches_restores_exactly_the_writes_before_its_mark(
        stack, admin, tmp_path, where, request):
    repository = str(tmp_path / "repo") if where == "folder" else f"s3://snapshots/{where}-{int(time.time())}"
    if where == "s3":
        request.getfixturevalue("s3_endpoint")
    source = f"{SOURCE}-{where}"
    admin.upsert(source, [doc(i, "seed") for i in range(SEEDS)])
    writer, searcher = Writer(stack, source), Searcher(stack, source)
    writer.start()
    searcher.start()
    while len(writer.acked) < 15 and writer.is_alive():
        time.sleep(0.05)
    before = time.monotonic()
    first = admin.create_snapshot(source, repository)
    after = time.monotonic()
    while len(writer.acked) < len(writer.sent) + 10 and writer.is_alive() and time.monotonic() < after + 20:
        time.sleep(0.05)  # writes go on after the snapshot
    second = admin.create_snapshot(source, repository)
    writer.stop.set()
    searcher.stop.set()
    writer.join(60)
    searcher.join(60)
    assert not writer.errors and not searcher.errors and searcher.answers > 0
    assert first.location.startswith(repository) and first.location.endswith(".json")
    assert first.write_pause_ms < 5000

    n = check_restored(stack, admin, first.location, f"snap-copy-{where}", writer, before, after)
    assert n >= 15
    # The second snapshot holds the later writes, and wrote far less than its whole.
    assert second.documents > first.documents and second.bytes_new < second.bytes_total / 2
    listed = admin.list_snapshots(source, repository)
    assert [s.location for s in listed.snapshots] == [second.location, first.location]
    with pytest.raises(HybridSearchError) as exists:
        admin.restore_snapshot(first.location, f"snap-copy-{where}")
    assert exists.value.code() == grpc.StatusCode.ALREADY_EXISTS
    gone = admin.delete_snapshot(first.location)
    assert gone.pieces_deleted >= 0
    assert [s.location for s in admin.list_snapshots(source, repository).snapshots] == [second.location]
    restored = admin.restore_snapshot(second.location, f"snap-second-{where}")
    assert restored.documents == second.documents  # the later snapshot still whole after the first's delete


def test_a_corrupted_snapshot_is_refused_and_nothing_is_restored(stack, admin, tmp_path):
    admin.upsert("snap-corrupt", [doc(i) for i in range(30)])
    repo = tmp_path / "repo"
    made = admin.create_snapshot("snap-corrupt", str(repo))
    pieces = sorted((repo / "pieces").rglob("*.zst"), key=lambda p: p.stat().st_size)
    victim = pieces[-1]
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 0xFF
    victim.write_bytes(bytes(data))
    with pytest.raises(HybridSearchError) as refused:
        admin.restore_snapshot(made.location, "snap-corrupt-copy")
    assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "corrupted" in refused.value.message and "nothing was restored" in refused.value.message
    with pytest.raises(HybridSearchError) as missing:
        admin.stats("snap-corrupt-copy")
    assert missing.value.code() == grpc.StatusCode.NOT_FOUND
    admin.upsert("snap-corrupt-copy", [doc(0, "after")])  # the name is free: no mark left behind
    manifest = Path(made.location)
    manifest.write_text(manifest.read_text().replace('"documents": 30', '"documents": 31', 1))
    with pytest.raises(HybridSearchError) as changed:
        admin.restore_snapshot(made.location, "snap-corrupt-other")
    assert changed.value.code() == grpc.StatusCode.FAILED_PRECONDITION and "checksum" in changed.value.message
    with pytest.raises(HybridSearchError) as nowhere:
        admin.restore_snapshot(str(repo / "snapshots" / "snap-corrupt" / "nope.json"), "x-other")
    assert nowhere.value.code() == grpc.StatusCode.NOT_FOUND
