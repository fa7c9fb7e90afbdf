"""Group commit (bm25.group_commit): concurrent writes share one commit, each gets its own result; and on
the real tantivy store, a group keeps the writes' order, isolates a failing write and is durable."""

import asyncio
import threading

from hybridsearch.bm25.group_commit import GroupCommit
from hybridsearch.bm25.tantivy_collection import Delete, TantivyCollection, Upsert
from hybridsearch.bm25.tantivy_engine import TantivyBm25Engine
from hybridsearch.text.chunking import content_hash
from hybridsearch.storage.stores import UpsertResult
from hybridsearch.v1 import common_pb2


class Store:
    """apply() as a store has it: records each group; blocks while `gate` is closed (a commit in flight)."""

    def __init__(self, fail_on=(), broken=False):
        self.groups: list[list] = []
        self.gate = threading.Event()
        self.gate.set()
        self.fail_on, self.broken = set(fail_on), broken

    def apply(self, writes):
        self.gate.wait(5)
        self.groups.append(list(writes))
        if self.broken:
            raise OSError("disk full")
        return [ValueError(f"bad {w}") if w in self.fail_on else f"ok {w}" for w in writes]


async def test_a_lone_write_commits_at_once_and_writes_that_wait_share_the_next_commit():
    store = Store()
    commits = GroupCommit(store.apply)
    assert await commits.submit("a") == "ok a"
    store.gate.clear()  # the next commit is slow: writes arriving meanwhile queue behind it
    first = asyncio.create_task(commits.submit("b"))
    await asyncio.sleep(0.05)
    rest = [asyncio.create_task(commits.submit(w)) for w in "cdef"]
    await asyncio.sleep(0.05)
    store.gate.set()
    assert await first == "ok b"
    assert [await t for t in rest] == ["ok c", "ok d", "ok e", "ok f"]
    assert store.groups == [["a"], ["b"], ["c", "d", "e", "f"]]
    assert commits.commits == 3


async def test_a_failed_write_fails_alone_and_a_failed_store_fails_its_whole_group():
    store = Store(fail_on={"bad"})
    commits = GroupCommit(store.apply)
    results = await asyncio.gather(*(commits.submit(w) for w in ["x", "bad", "y"]), return_exceptions=True)
    assert results[0] == "ok x" and results[2] == "ok y"
    assert isinstance(results[1], ValueError) and "bad bad" in str(results[1])
    broken = GroupCommit(Store(broken=True).apply)
    results = await asyncio.gather(*(broken.submit(w) for w in "pq"), return_exceptions=True)
    assert all(isinstance(r, OSError) for r in results)
    assert broken.commits == 0  # nothing was applied
    assert await GroupCommit(Store().apply).submit("after") == "ok after"  # nothing stays stuck


async def test_groups_are_bounded_and_a_caller_that_gives_up_does_not_stop_its_group():
    store = Store()
    commits = GroupCommit(store.apply, max_group=3)
    store.gate.clear()
    head = asyncio.create_task(commits.submit(0))
    await asyncio.sleep(0.05)
    tasks = [asyncio.create_task(commits.submit(i)) for i in range(1, 8)]
    await asyncio.sleep(0.05)
    tasks[0].cancel()  # its deadline passed: the write still goes down with its group
    store.gate.set()
    await head
    done = await asyncio.gather(*tasks, return_exceptions=True)
    assert isinstance(done[0], asyncio.CancelledError) and done[1:] == [f"ok {i}" for i in range(2, 8)]
    assert [len(g) for g in store.groups] == [1, 3, 3, 1] and [1, 2, 3] in store.groups


# --- on the real tantivy store -------------------------------------------------------------------------

def chunk(doc_id, text):
    return common_pb2.Chunk(chunk_id=f"{doc_id}#0", doc_id=doc_id, position=0, text=text,
                            content_hash=content_hash("", text, {}))


def collection(engine: TantivyBm25Engine, name="c") -> TantivyCollection:
    return engine._collection(name)


async def test_one_group_keeps_its_writes_order(tmp_path):
    engine = TantivyBm25Engine(tmp_path)
    store = collection(engine)
    store.apply([Upsert([chunk("kept", "first version"), chunk("gone", "to be deleted")])])
    results = store.apply([
        Upsert([chunk("kept", "second version")]), Upsert([chunk("kept", "third version")]),
        Upsert([chunk("kept", "third version")]),  # the group's own pending version: unchanged
        Delete(["gone"]), Upsert([chunk("gone", "back again")]), Delete(["never"]),
        Upsert([chunk("new", "brand new")]), Delete(["new"]),
    ])
    assert [(r.documents_written, r.documents_unchanged) if hasattr(r, "documents_written") else r
            for r in results] == [(1, 0), (1, 0), (0, 1), (1, 1), (1, 0), (0, 0), (1, 0), (1, 1)]
    stored = {c.doc_id: c.text for c in await engine.get_chunks("c", ["kept", "gone", "new", "never"])}
    assert stored == {"kept": "third version", "gone": "back again"}
    stats = await engine.stats("c")
    assert (stats.documents, stats.chunks) == (2, 2)


async def test_a_failing_write_fails_alone_and_the_rest_of_its_group_lands(tmp_path, monkeypatch):
    engine = TantivyBm25Engine(tmp_path)
    store = collection(engine)
    document = TantivyCollection._document

    def fussy(self, c, analyzer):
        if c.doc_id == "poison":
            raise ValueError("cannot index poison")
        return document(self, c, analyzer)

    monkeypatch.setattr(TantivyCollection, "_document", fussy)
    results = store.apply([Upsert([chunk("a", "alpha")]), Upsert([chunk("poison", "x")]),
                           Upsert([chunk("b", "beta")])])
    assert isinstance(results[1], ValueError)
    assert [r.documents_written for r in (results[0], results[2])] == [1, 1]
    assert sorted(c.doc_id for c in await engine.get_chunks("c", ["a", "poison", "b"])) == ["a", "b"]


async def test_concurrent_writers_share_commits_and_every_acknowledged_write_survives_a_reopen(tmp_path):
    engine = TantivyBm25Engine(tmp_path)
    await engine.upsert("c", [chunk("seed", "seed text")])

    async def writer(w):
        for i in range(10):
            result = await engine.upsert("c", [chunk(f"w{w}-{i}", f"writer {w} note {i}")])
            assert result.documents_written == 1
        assert await engine.delete("c", [f"w{w}-0"]) == (1, 1)

    await asyncio.gather(*(writer(w) for w in range(8)))
    commits = engine.commits("c")
    assert commits < 8 * 11  # 88 writes acknowledged; the writes that queued shared commits
    await engine.close()
    reopened = TantivyBm25Engine(tmp_path)
    stats = await reopened.stats("c")
    assert (stats.documents, stats.chunks) == (1 + 8 * 9, 1 + 8 * 9)
    (hits,) = await reopened.search("c", ["writer 7 note 9"], 3, [])
    assert hits[0].doc_id == "w7-9"


def test_writes_that_change_nothing_answer_without_error(tmp_path):
    store = collection(TantivyBm25Engine(tmp_path))
    store.apply([Upsert([chunk("a", "alpha")])])
    assert store.apply([Upsert([]), Delete([]), Delete(["absent"]), Upsert([chunk("a", "alpha")])]) == [
        UpsertResult(), (0, 0), (0, 0), UpsertResult(documents_unchanged=1)]


async def test_a_stopping_service_cancels_what_waits_instead_of_leaving_it_hanging():
    store = Store()
    commits = GroupCommit(store.apply)
    store.gate.clear()
    waiting = [asyncio.create_task(commits.submit(w)) for w in "ab"]
    await asyncio.sleep(0.05)
    commits._drain.cancel()  # as the event loop's shutdown cancels its tasks
    store.gate.set()
    done = await asyncio.wait_for(asyncio.gather(*waiting, return_exceptions=True), 5)
    assert all(isinstance(d, asyncio.CancelledError) for d in done)
