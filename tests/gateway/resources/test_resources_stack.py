"""Collections and documents as resources through the real gateway, keys on (the stack's admin key):
GetDocuments, ListCollections, DropCollection (both stores, Redis entries, holds), searches of collections
that do not exist, and the CLI commands over them (gateway/resources/collections.py and the modules it calls)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time

import pytest
import redis
import redis.asyncio as aioredis
from stacks import client_environment

from hybridsearch.client import FailedPrecondition, InvalidArgument, NotFound, document
from hybridsearch.storage.holds import Holds
from hybridsearch.expansion.cache import collection_pattern as expansion_pattern
from hybridsearch.gateway.query.paging import collection_pattern as order_pattern

pytestmark = [pytest.mark.stack, pytest.mark.timeout(600)]
DOCS, OTHER = "res-docs", "res-other"
GUIDE = ("# Install\n\nRun the installer and answer its questions about the harbor ledger.\n\n"
         "## Linux\n\nUse the package manager; the harbor ledger service starts on boot.")


@pytest.fixture(scope="module")
def corpus(gateway):
    gateway.upsert(DOCS, [document("guide", GUIDE, title="Harbor guide", type="howto")] +
                   [document(f"note-{i}", f"Harbor ledger note {i}: the ledger keeps tides and cargo {i}.",
                             title=f"Note {i}") for i in range(12)])
    gateway.upsert(OTHER, [document("o1", "Harbor ledger kept elsewhere: the other collection's note.")])
    return gateway


def redis_keys(stack, collection: str) -> set[bytes]:
    client = redis.Redis.from_url(stack.settings.redis.cache_at)
    return {k for pattern in (order_pattern, expansion_pattern) for k in client.scan_iter(match=pattern(collection))}


def test_get_documents_gives_text_title_metadata_and_chunk_spans(corpus):
    reply = corpus.get_documents(DOCS, ["guide", "no-such-doc", "note-3"])
    assert [d.id for d in reply.documents] == ["guide", "note-3"] and list(reply.missing) == ["no-such-doc"]
    guide = reply.documents[0]
    assert guide.title == "Harbor guide" and dict(guide.metadata) == {"type": "howto"}
    assert guide.text == GUIDE
    assert [c.chunk_id for c in guide.chunks] == ["guide#0"] or len(guide.chunks) >= 1
    for c in guide.chunks:
        assert guide.text[c.start:c.end] and c.chunk_id.startswith("guide#")
    assert guide.content_hash and guide.written_at_ms > 0


def test_get_documents_of_a_collection_that_does_not_exist_is_not_found(corpus):
    with pytest.raises(NotFound, match="collection 'res-nonexistent' does not exist"):
        corpus.get_documents("res-nonexistent", ["guide"])
    with pytest.raises(InvalidArgument, match="1-100 ids"):
        corpus.get_documents(DOCS, [])


def test_list_collections_counts_each_store(corpus):
    listed = {c.name: c for c in corpus.list_collections().collections}
    docs = listed[DOCS]
    assert (docs.documents, docs.language) == (13, "en")
    assert {s.store: s.documents for s in docs.stores} == {"bm25": 13, "vector": 13}
    assert all(s.engine for s in docs.stores) and docs.chunks >= 13
    assert listed[OTHER].documents == 1


def test_a_search_of_a_collection_that_does_not_exist_is_not_found(corpus):
    """Before: `-c audit-nonexistent` answered "Reranked 0 of 0, returned 0" with every leg ok."""
    with pytest.raises(NotFound, match="collection 'audit-nonexistent' does not exist"):
        corpus.search("harbor ledger", collection="audit-nonexistent")
    with pytest.raises(NotFound, match="none of the collections exists: 'audit-x', 'audit-y'"):
        corpus.search("harbor ledger", collections=["audit-x", "audit-y"])
    reply = corpus.search("harbor ledger", collections=[OTHER, "audit-nonexistent"], effort="fast")
    assert reply.hits and {h.doc_id for h in reply.hits} == {"o1"}
    assert "collection 'audit-nonexistent' does not exist: the answer is from res-other" in reply.notices


def test_drop_removes_both_stores_and_its_redis_entries_and_is_idempotent(stack, corpus):
    corpus.upsert("res-drop", [document(f"d{i}", f"Harbor ledger drop note {i}.") for i in range(8)])
    first = corpus.search("harbor ledger", collection="res-drop", top_k=2, effort="fast")
    corpus.search("harbor ledger notes", collections=["res-drop", OTHER], top_k=2, effort="fast")
    corpus.search("harbor ledger drop", collection="res-drop", effort="balanced", expand=True)
    deadline = time.monotonic() + 5  # page orders are written after the answer
    while len(redis_keys(stack, "res-drop")) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    kept = redis_keys(stack, "res-drop")
    assert len(kept) >= 2, kept
    dropped = corpus.drop_collection("res-drop")
    assert (dropped.existed, dropped.documents, dropped.cache_entries) == (True, 8, len(kept))
    assert redis_keys(stack, "res-drop") == set()
    assert not (stack.settings.data_dir / "bm25-tantivy" / "res-drop").exists()
    assert "res-drop" not in {c.name for c in corpus.list_collections().collections}
    with pytest.raises(NotFound):
        corpus.search("harbor ledger", collection="res-drop")
    with pytest.raises(InvalidArgument, match="expired"):
        corpus.search("harbor ledger", collection="res-drop", top_k=2, effort="fast", page_token=first.next_page_token)
    again = corpus.drop_collection("res-drop")
    assert (again.existed, again.documents) == (False, 0)
    assert corpus.get_documents(OTHER, ["o1"]).documents  # the others stay


def test_drop_is_refused_while_a_reconcile_holds_the_collection(stack, corpus):
    corpus.upsert("res-held", [document("h1", "Harbor ledger held.")])

    async def held_drop():
        client = aioredis.Redis.from_url(stack.settings.redis.state_url)
        try:
            async with Holds(client).hold("res-held", "reconcile"):
                with pytest.raises(FailedPrecondition, match="'res-held' is held by reconcile"):
                    await asyncio.to_thread(corpus.drop_collection, "res-held")
        finally:
            await client.aclose()

    asyncio.run(held_drop())
    assert corpus.get_documents("res-held", ["h1"]).documents  # untouched
    assert corpus.drop_collection("res-held").existed  # released: the drop goes through


def test_the_cli_lists_gets_deletes_and_counts(stack, corpus):
    with client_environment(stack):
        env = {**os.environ, "COLUMNS": "200"}

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "hybridsearch.cli", *args], env=env, capture_output=True,
                              text=True, timeout=120)

    listed = cli("collections")
    assert listed.returncode == 0 and "…" not in listed.stdout and "res-docs" in listed.stdout, listed.stderr
    got = cli("docs", "get", "guide", "-c", DOCS)
    assert got.returncode == 0 and "Use the package manager" in got.stdout and "guide#0" in got.stdout
    assert cli("docs", "get", "guide", "-c", "res-nonexistent").returncode == 2
    corpus.upsert(DOCS, [document("gone", "Harbor ledger to delete.")])
    deleted = cli("docs", "delete", "gone", "-c", DOCS)
    assert deleted.returncode == 0 and "deleted 1 of 1" in deleted.stderr
    assert list(corpus.get_documents(DOCS, ["gone"]).missing) == ["gone"]
    counted = cli("stats", "-c", DOCS)
    assert counted.returncode == 0 and "bm25" in counted.stdout and "13" in counted.stdout
