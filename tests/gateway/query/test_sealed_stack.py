"""Sealed collections beside others and under repair, through the real stack (issue 26; gateway/query/sealed.py,
reconcile/run.py): several collections in one query (two sealed with keys of their own and a plain one) give
each collection's right hits, each opened with its own key, and an explain that names a sealed boost by its
keyed hash and holds none of a sealed collection's texts, titles, tags or metadata values; a sealed collection
whose stores drift (a document deleted from each store behind the gateway's back) is repaired by
`hybridsearch reconcile`, and the copies it writes stay sealed and open; a sealed collection's snapshot restores
under a new name only once that name adopted its keys (`keys adopt`), then opens and takes writes there. Helpers and marker words as in
tests/gateway/query/test_sealed.py (its own stack; this one beside it on other ports)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from stacks import store_call
from test_sealed import DECLARED, Words, sealed_stack, search

from hybridsearch.client import GatewayClient
from hybridsearch.security.sealing import Sealer
from hybridsearch.v1 import common_pb2

pytestmark = [pytest.mark.stack, pytest.mark.timeout(900)]

SEALED_A, SEALED_B, PLAIN, DRIFT = "vault-a", "vault-b", "vault-open", "vault-drift"
COPY, MISMATCHED = "vault-copy", "vault-mismatched"  # restore targets: declared like SEALED_A, no data
WORDS = {SEALED_A: Words("zya"), SEALED_B: Words("zyb"), PLAIN: Words("qwo"), DRIFT: Words("zyd")}
SEALED = (SEALED_A, SEALED_B, DRIFT)
BM25 = dict(effort=common_pb2.EFFORT_FAST, mode=common_pb2.RETRIEVAL_MODE_BM25)
DENSE = dict(effort=common_pb2.EFFORT_FAST, mode=common_pb2.RETRIEVAL_MODE_VECTOR)


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    declared = {name: {**DECLARED, "sealed": name in SEALED} for name in (*WORDS, COPY, MISMATCHED)}
    declared[COPY]["sealed"] = declared[MISMATCHED]["sealed"] = True
    with sealed_stack(tmp_path_factory.mktemp("sealed-stack"), ("2465", "2619", "2825"), declared,
                      (*SEALED, MISMATCHED)) as running:  # a key each; MISMATCHED's its own
        yield running


@pytest.fixture(scope="module")
def client(stack):
    client = GatewayClient(stack.settings.endpoints.addr("gateway"))
    for collection, words in WORDS.items():
        assert client.upsert(collection, words.documents()).documents_written == 6
    yield client
    client.close()


def test_several_collections_answer_each_opened_with_its_own_key(stack, client):
    query = " ".join(WORDS[c].body[1] for c in (SEALED_A, SEALED_B, PLAIN))  # in doc-0, -1, -3 and -4 of each
    answer = search(client, SEALED_A, query, collections=[SEALED_A, SEALED_B, PLAIN], top_k=12, explain=True, **BM25)
    by_collection: dict[str, list[str]] = {}
    for hit in answer.hits:
        words = WORDS[hit.collection]
        assert hit.title.startswith(f"{words.title} memo number") and words.body[1] in hit.snippet, hit
        by_collection.setdefault(hit.collection, []).append(hit.doc_id)
    assert {c: sorted(d) for c, d in by_collection.items()} == {c: ["doc-0", "doc-1", "doc-3", "doc-4"]
                                                                  for c in (SEALED_A, SEALED_B, PLAIN)}
    # the two sealed collections' keys differ: either one's records do not open with the other's key
    keys = {c: Sealer(stack.settings).of(c) for c in (SEALED_A, SEALED_B)}
    assert keys[SEALED_A].keys.active != keys[SEALED_B].keys.active
    assert keys[SEALED_A].hash_value("type", "decision") != keys[SEALED_B].hash_value("type", "decision")
    # explain: each collection's boost of doc-4 (type=decision), a sealed one's by its keyed hash, the plain
    # one's in clear; no sealed collection's title, tags, metadata values or unasked words
    boosts = {(b.collection, b.stage): b for b in answer.explain.boosts}
    assert {c for c, _ in boosts} == {SEALED_A, SEALED_B, PLAIN}
    for (collection, _), boost in boosts.items():
        assert (boost.doc_id, boost.field) == ("doc-4", "type")
        expected = keys[collection].hash_value("type", "decision") if collection in keys else "decision"
        assert boost.value == expected, collection
    explain = answer.explain.SerializeToString()
    assert b"decision" in explain  # the plain collection's boost: the scan sees clear values where they are
    for collection in (SEALED_A, SEALED_B):
        words = WORDS[collection]
        for marker in (*words.in_clear[3:], words.body[0], words.body[2]):
            assert marker.encode() not in explain, (collection, marker)


def test_a_sealed_boost_is_explained_by_its_hashed_value(stack, client):
    answer = search(client, SEALED_A, WORDS[SEALED_A].body[1], explain=True, **BM25)
    hashed = Sealer(stack.settings).of(SEALED_A).hash_value("type", "decision")
    assert [(b.doc_id, b.value) for b in answer.explain.boosts] == [("doc-4", hashed)]
    assert b"decision" not in answer.explain.SerializeToString()
    plain = search(client, PLAIN, WORDS[PLAIN].body[1], explain=True, **BM25)
    assert [(b.doc_id, b.value) for b in plain.explain.boosts] == [("doc-4", "decision")]


def test_reconcile_repairs_a_sealed_collection_and_its_copies_stay_sealed(stack, client):
    words = WORDS[DRIFT]
    store_call(stack, "vector", "DeleteDocuments", common_pb2.DeleteDocumentsRequest(collection=DRIFT, doc_ids=["doc-1"]))
    store_call(stack, "bm25", "DeleteDocuments", common_pb2.DeleteDocumentsRequest(collection=DRIFT, doc_ids=["doc-3"]))
    assert "doc-3" not in {h.doc_id for h in search(client, DRIFT, words.body[1], top_k=10, **BM25).hits}
    assert "doc-1" not in {h.doc_id for h in search(client, DRIFT, words.body[1], top_k=10, **DENSE).hits}

    fixed = reconcile(stack, DRIFT)
    assert fixed["repaired"] == 2 and fixed["found"]["missing"] == 2, fixed
    bm25, vector = listing(stack, "bm25"), listing(stack, "vector")
    assert bm25 == vector and len(bm25) == 6
    # the copies are the sealed records: no text in either store, and they open with the collection's key
    for store in ("bm25", "vector"):
        chunks = store_call(stack, store, "GetChunks", common_pb2.GetChunksRequest(collection=DRIFT, doc_ids=["doc-1", "doc-3"])).chunks
        assert sorted({c.doc_id for c in chunks}) == ["doc-1", "doc-3"], store
        assert all(c.HasField("sealed") and not c.text and not c.title for c in chunks), store
    originals = {d.id: d for d in words.documents()}
    opened = client.get_documents(DRIFT, ["doc-1", "doc-3"]).documents
    assert [(d.id, d.title, d.text) for d in opened] == [(i, originals[i].title, originals[i].text.strip())
                                                         for i in ("doc-1", "doc-3")]
    # and each store searches its copy again: BM25 the words reconcile opened for it, the vector store's passage
    lexical = search(client, DRIFT, words.body[1], top_k=10, **BM25)
    assert sorted(h.doc_id for h in lexical.hits) == ["doc-0", "doc-1", "doc-3", "doc-4"]
    assert all(h.title.startswith(words.title) for h in lexical.hits)
    dense = {h.doc_id: h for h in search(client, DRIFT, words.body[1], top_k=10, **DENSE).hits}
    assert len(dense) == 6 and dense["doc-1"].title == originals["doc-1"].title
    assert reconcile(stack, DRIFT)["repaired"] == 0


def listing(stack, store: str) -> dict[str, str]:
    pages = store_call(stack, store, "ListDocuments", common_pb2.ListDocumentsRequest(collection=DRIFT), stream=True)
    return {d.doc_id: d.content_hash for page in pages for d in page.documents}


def reconcile(stack, collection: str) -> dict:
    out = stack.settings.data_dir / f"reconcile-{collection}.json"
    proc = subprocess.run([sys.executable, "-m", "hybridsearch.cli", "reconcile", "-c", collection, "--json-out", str(out)],
                          capture_output=True, text=True, timeout=120, env=stack.test_env)  # this stack's settings
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(out.read_text())[0]


def cli(stack, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hybridsearch.cli", *args], capture_output=True, text=True,
                          timeout=120, env=stack.test_env)


def test_a_sealed_snapshot_restores_under_a_new_name_once_it_adopted_the_keys(stack, client, tmp_path):
    from hybridsearch.client import HybridSearchError

    words = WORDS[SEALED_A]
    made = client.create_snapshot(SEALED_A, str(tmp_path / "repo"))
    for target, says in ((COPY, f"hybridsearch keys adopt -c {COPY} --from {SEALED_A}"),
                         (MISMATCHED, f"sealed under the name {SEALED_A!r} and {MISMATCHED!r}'s keys seal under")):
        with pytest.raises(HybridSearchError) as refused:
            client.restore_snapshot(made.location, target)
        assert refused.value.code().name == "FAILED_PRECONDITION" and says in refused.value.message, refused.value.message
        with pytest.raises(HybridSearchError) as missing:  # nothing restored, no mark left
            client.stats(target)
        assert missing.value.code().name == "NOT_FOUND"
    adopted = cli(stack, "keys", "adopt", "-c", COPY, "--from", SEALED_A)
    assert adopted.returncode == 0, adopted.stdout + adopted.stderr
    assert cli(stack, "keys", "adopt", "-c", COPY, "--from", SEALED_A).returncode == 2  # once
    assert client.restore_snapshot(made.location, COPY).documents == 6
    # the restored records open: previews, titles, GetDocuments' texts; the stores hold none of it in clear
    lexical = search(client, COPY, words.body[1], top_k=10, **BM25)
    assert sorted(h.doc_id for h in lexical.hits) == ["doc-0", "doc-1", "doc-3", "doc-4"]
    assert all(h.title.startswith(f"{words.title} memo number") and words.body[1] in h.snippet for h in lexical.hits)
    originals = {d.id: d for d in words.documents()}
    assert [(d.id, d.text) for d in client.get_documents(COPY, ["doc-2"]).documents] == [
        ("doc-2", originals["doc-2"].text.strip())]
    chunks = store_call(stack, "bm25", "GetChunks", common_pb2.GetChunksRequest(collection=COPY, doc_ids=["doc-2"])).chunks
    assert chunks and all(c.HasField("sealed") and not c.text for c in chunks)
    # a write after the restore seals under the name the keys carry and opens beside the restored records
    extra = words.documents()[0]
    extra.id = "doc-new"
    assert client.upsert(COPY, [extra]).documents_written == 1
    assert client.get_documents(COPY, ["doc-new"]).documents[0].text == extra.text.strip()
    assert "doc-new" in {h.doc_id for h in search(client, COPY, words.body[1], top_k=10, **BM25).hits}
    assert len(search(client, SEALED_A, words.body[1], top_k=10, **BM25).hits) == 4  # the source as it was
