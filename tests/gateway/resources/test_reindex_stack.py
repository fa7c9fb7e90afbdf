"""Re-indexing behind an alias through the real stack: a collection moved to another embedder while a writer
(new documents, changed ones, deleted ones) and a searcher run; the new generation holds exactly what the
serving one holds, id by id and hash by hash in both stores, and what the writer acknowledged; the switch and
the rollback fail no search, the rollback gives back the old answers, and writes after the switch reach the
generation kept for the rollback. Generations: read by name, never written by name, dropped one at a time or
with their alias."""

from __future__ import annotations

import threading
import time

import pytest
import redis

from hybridsearch.client import GatewayClient, HybridSearchError, document
from hybridsearch.gateway.resources.aliases import ALIASES_KEY
from hybridsearch.v1 import aliases_pb2, common_pb2
from stacks import client_environment, store_call

pytestmark = pytest.mark.stack
SOURCE = "reidx"
SEEDS = 120
QUERIES = ("orchard frost apples", "beehive honey yield", "river flood levels", "winter pruning of pear trees")
TOPICS = ("orchard frost damaged the apples", "the beehive honey yield rose", "river flood levels at the mill",
          "winter pruning of pear trees", "soil moisture after rain")


def doc(key: str, i: int, version: int = 0):
    return document(key, f"Farm journal {i}, version {version}: {TOPICS[i % len(TOPICS)]}; entry {i} notes the "
                         f"{['morning', 'evening'][version % 2]} round.", title=f"Journal {i}")


def stored(stack, store: str, collection: str) -> dict[str, tuple[str, str]]:
    """Each document's content hash and readers, as one store holds the collection."""
    pages = store_call(stack, store, "ListDocuments", common_pb2.ListDocumentsRequest(collection=collection),
                       stream=True)
    return {d.doc_id: (d.content_hash, d.readers) for page in pages for d in page.documents}


def connect(stack) -> GatewayClient:
    with client_environment(stack):
        return GatewayClient(stack.settings.endpoints.addr("gateway"))


class Writer(threading.Thread):
    """New documents, changes of the seeds and deletions, one at a time; `present` is what was acknowledged."""

    def __init__(self, stack) -> None:
        super().__init__(daemon=True)
        self.stack, self.stop, self.errors = stack, threading.Event(), []
        self.present = {f"seed-{i:04d}" for i in range(SEEDS)}
        self.acked = 0

    def run(self) -> None:
        with connect(self.stack) as client:
            for i in range(3000):
                if self.stop.is_set():
                    return
                try:
                    if i % 5 == 3:
                        client.delete(SOURCE, [f"seed-{(i * 7) % SEEDS:04d}"])
                        self.present.discard(f"seed-{(i * 7) % SEEDS:04d}")
                    elif i % 5 == 1:
                        key = f"seed-{(i * 3) % SEEDS:04d}"
                        client.upsert(SOURCE, [doc(key, (i * 3) % SEEDS, i)])
                        self.present.add(key)
                    else:
                        client.upsert(SOURCE, [doc(f"new-{i:05d}", i)])
                        self.present.add(f"new-{i:05d}")
                except HybridSearchError as err:
                    self.errors.append(f"{err.code().name}: {err.message}")
                    return
                self.acked += 1
                time.sleep(0.02)


class Searcher(threading.Thread):
    def __init__(self, stack) -> None:
        super().__init__(daemon=True)
        self.stack, self.stop, self.errors, self.answers = stack, threading.Event(), [], 0

    def run(self) -> None:
        with connect(self.stack) as client:
            for i in range(100_000):
                if self.stop.is_set():
                    return
                try:
                    client.search(QUERIES[i % len(QUERIES)], collection=SOURCE, effort="fast", timeout=30)
                    self.answers += 1
                except HybridSearchError as err:
                    self.errors.append(f"{err.code().name}: {err.message}")


@pytest.fixture(scope="module")
def admin(stack):
    with connect(stack) as client:
        yield client


def answers(client, collection: str = SOURCE) -> list[list[str]]:
    return [[h.doc_id for h in client.search(q, collection=collection, effort="fast", rerank=False, top_k=10).hits]
            for q in QUERIES]


def test_a_reindex_under_writes_and_searches_switches_and_rolls_back_losing_nothing(stack, admin):
    admin.upsert(SOURCE, [doc(f"seed-{i:04d}", i) for i in range(SEEDS)])
    writer, searcher = Writer(stack), Searcher(stack)
    writer.start()
    searcher.start()
    while writer.acked < 20 and writer.is_alive():
        time.sleep(0.05)
    progress = list(admin.reindex(SOURCE, "static-minilm", batch_documents=16))
    built = progress[-1]
    assert built.phase == aliases_pb2.REINDEX_PHASE_BUILT and built.generation == 1
    assert progress[0].phase == aliases_pb2.REINDEX_PHASE_CREATED
    assert any(p.round >= 2 for p in progress)  # the writes during the first copy were caught by a later round
    while writer.acked < 60 and writer.is_alive():
        time.sleep(0.05)  # writes go on after the build: mirrored into both generations
    info = admin.switch_alias(SOURCE, 1)  # with the writer and the searcher running
    assert info.serving == 1
    time.sleep(1.5)
    writer.stop.set()
    writer.join(60)
    assert not writer.errors, writer.errors[:3]

    # both generations hold exactly what was acknowledged, in both stores, hash by hash
    old, new = {s: stored(stack, s, SOURCE) for s in ("bm25", "vector")}, {s: stored(stack, s, "reidx.g1") for s in ("bm25", "vector")}
    for store in ("bm25", "vector"):
        assert set(new[store]) == writer.present, store
        assert new[store] == old[store], store
    vector = {s.store: s for s in admin.stats(SOURCE).stores}["vector"]
    assert vector.details["embedder"] == "static-minilm" and vector.documents == len(writer.present)
    switched_answers = answers(admin)
    assert answers(admin, "reidx.g1") == switched_answers  # the alias reads generation 1 now
    before = answers(admin, "reidx.g0")  # generation 0 by its name: what the collection answered before
    info = admin.rollback_alias(SOURCE)
    assert info.serving == 0 and [g.role for g in info.generations] == [aliases_pb2.GENERATION_ROLE_SERVING,
                                                                         aliases_pb2.GENERATION_ROLE_PREVIOUS]
    time.sleep(1.5)  # every gateway's searches read the record anew within aliases.READ_TTL_S
    searcher.stop.set()
    searcher.join(60)
    assert not searcher.errors and searcher.answers > 0, searcher.errors[:3]
    assert answers(admin) == before
    vector = {s.store: s for s in admin.stats(SOURCE).stores}["vector"]
    assert vector.details["embedder"] != "static-minilm"


def test_generations_are_read_by_name_never_written_by_name_and_dropped_with_their_alias(stack, admin):
    admin.upsert("reidx-b", [doc(f"b-{i}", i) for i in range(10)])
    last = list(admin.reindex("reidx-b", switch=True))[-1]
    assert last.phase == aliases_pb2.REINDEX_PHASE_SWITCHED and last.alias.serving == 1
    with pytest.raises(HybridSearchError) as refused:
        admin.upsert("reidx-b.g1", [doc("b-x", 1)])
    assert refused.value.code().name == "INVALID_ARGUMENT" and "write to 'reidx-b'" in refused.value.message
    with pytest.raises(HybridSearchError) as refused:
        admin.drop_generation("reidx-b", 1)
    assert refused.value.code().name == "FAILED_PRECONDITION"
    admin.upsert("reidx-b", [doc("b-after", 3)])  # reaches the previous generation too
    assert "b-after" in stored(stack, "bm25", "reidx-b") and "b-after" in stored(stack, "vector", "reidx-b.g1")
    assert [h.doc_id for h in admin.search("Farm journal", collection="reidx-b.g1", effort="fast").hits]
    names = {c.name for c in admin.list_collections().collections}
    assert "reidx-b" in names and "reidx-b.g1" not in names
    dropped = admin.drop_collection("reidx-b")
    assert dropped.existed and dropped.documents == 2 * 11
    assert "reidx-b" not in stored(stack, "bm25", "reidx-b") and not stored(stack, "vector", "reidx-b.g1")
    with pytest.raises(HybridSearchError) as gone:
        admin.get_alias("reidx-b")
    assert gone.value.code().name == "NOT_FOUND"


def test_a_reindex_cut_short_keeps_its_generation_in_step_and_the_rerun_finishes_it(stack, admin):
    admin.upsert("reidx-c", [doc(f"c-{i:03d}", i) for i in range(150)])
    call = admin.aliases_stub.Reindex(aliases_pb2.ReindexRequest(collection="reidx-c", embedder="static-minilm",
                                                                 batch_documents=10))
    assert next(call).phase == aliases_pb2.REINDEX_PHASE_CREATED
    next(call)  # a first batch copied
    call.cancel()  # the client goes away mid-copy
    time.sleep(1.0)
    info = admin.get_alias("reidx-c")
    assert info.serving == 0 and info.generations[1].role == aliases_pb2.GENERATION_ROLE_BUILDING
    admin.upsert("reidx-c", [doc("c-late", 1)])  # written while half-built: mirrored into it
    assert "c-late" in stored(stack, "vector", "reidx-c.g1")
    regrouped = doc("c-001", 1)  # the same text with readers of its own: the readers follow into the generation
    regrouped.acl.allow.append("group:hr")
    admin.upsert("reidx-c", [regrouped])
    with pytest.raises(HybridSearchError) as refused:  # another embedder cannot take over a half-built generation
        list(admin.reindex("reidx-c", "minilm-fp32"))
    assert refused.value.code().name == "FAILED_PRECONDITION" and "alias drop reidx-c 1" in refused.value.message
    with pytest.raises(HybridSearchError) as early:
        admin.switch_alias("reidx-c", 1)
    assert early.value.code().name == "FAILED_PRECONDITION" and "still being built" in early.value.message
    last = list(admin.reindex("reidx-c", "static-minilm", switch=True))[-1]
    assert last.phase == aliases_pb2.REINDEX_PHASE_SWITCHED and last.generation == 1
    for store in ("bm25", "vector"):
        assert stored(stack, store, "reidx-c.g1") == stored(stack, store, "reidx-c") and len(stored(stack, store, "reidx-c")) == 151
    admin.drop_collection("reidx-c")


def test_a_reindex_into_another_analysis_language_keeps_the_embedder_and_analyzes_anew(stack, admin):
    german = [document(f"de-{i}", text, title="Notiz") for i, text in enumerate((
        "Die alten Häuser stehen an den Flüssen der Stadt.", "Im Garten blühen die Rosen im Sommer.",
        "Der Bäcker verkauft frisches Brot am Morgen."))]
    admin.upsert("reidx-lang", german)  # declared English (the default): German words analyzed as English

    def bm25_hits(collection: str) -> list[str]:
        return [h.doc_id for h in admin.search("Haus", collection=collection, mode="bm25", effort="fast").hits]

    assert bm25_hits("reidx-lang") == []
    last = list(admin.reindex("reidx-lang", language="de"))[-1]
    assert last.phase == aliases_pb2.REINDEX_PHASE_BUILT
    assert bm25_hits("reidx-lang.g1") == ["de-0"]  # German stemming: Häuser -> haus
    g1 = last.alias.generations[1]
    assert (g1.language, g1.embedder) == ("de", last.alias.generations[0].embedder)  # the embedder kept
    admin.switch_alias("reidx-lang", 1)
    time.sleep(1.5)
    assert bm25_hits("reidx-lang") == ["de-0"]
    assert {s.store: s for s in admin.stats("reidx-lang").stores}["bm25"].details["language"] == "de"
    admin.drop_collection("reidx-lang")


def test_an_alias_outlives_a_redis_restart_and_a_lost_record_leaves_no_stale_generation(stack, admin):
    admin.upsert("reidx-r", [doc(f"r-{i}", i) for i in range(8)])
    assert list(admin.reindex("reidx-r", "static-minilm", switch=True))[-1].alias.serving == 1
    stack.stop_one("redis")
    stack.start_redis()  # serve all's Redis keeps an append-only file in the data dir
    info = admin.get_alias("reidx-r")
    assert info.serving == 1 and {s.store: s for s in admin.stats("reidx-r").stores}["vector"].details["embedder"] == "static-minilm"
    # a record lost all the same (a Redis without its data): a new re-index does not reuse the generation left
    redis.Redis.from_url(stack.settings.redis.state_url).hdel(ALIASES_KEY, "reidx-r")
    admin.delete("reidx-r", ["r-0"])  # no record: written to generation 0 only; generation 1 still holds r-0
    time.sleep(1.5)
    last = list(admin.reindex("reidx-r", "static-minilm"))[-1]
    assert last.generation == 1 and [p for p in last.alias.generations if p.number == 1][0].documents == 7
    assert "r-0" not in stored(stack, "vector", "reidx-r.g1")
    admin.drop_collection("reidx-r")


def test_a_snapshot_of_an_alias_takes_its_serving_generation_and_restores_with_its_embedder(stack, admin, tmp_path):
    admin.upsert("reidx-s", [doc(f"s-{i}", i) for i in range(12)])
    list(admin.reindex("reidx-s", "static-minilm", switch=True))
    made = admin.create_snapshot("reidx-s", str(tmp_path / "repo"))
    assert made.collection == "reidx-s" and made.documents == 12
    done = admin.restore_snapshot(made.location, "reidx-s-copy")  # the vectors' record travels with them
    assert done.documents == 12
    vector = {s.store: s for s in admin.stats("reidx-s-copy").stores}["vector"]
    assert vector.details["embedder"] == "static-minilm"
    assert answers(admin, "reidx-s-copy") == answers(admin, "reidx-s")
    with pytest.raises(HybridSearchError) as refused:  # an alias is no restore target
        admin.restore_snapshot(made.location, "reidx-s")
    assert refused.value.code().name == "ALREADY_EXISTS"
    admin.drop_collection("reidx-s")
    admin.drop_collection("reidx-s-copy")
