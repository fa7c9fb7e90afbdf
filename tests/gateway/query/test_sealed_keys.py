"""A sealed collection's key lifecycle through the real stack and the real CLI (issue 26; cli/sealing.py,
reconcile/rotate.py, security/sealing.py): `keys rotate` stopped after a few batches leaves records under two
keys and every filter, the tag leg and boosts still match every document; a rotation killed with SIGKILL
after its first batch finishes when run again, nothing lost, every record of both stores read back under the
new key; `keys retire` refuses a key in use and removes it once unused. `keys destroy`: the search right
after fails with FAILED_PRECONDITION naming the destruction, writes are refused, the drop leaves none of the
collection's words, tags or stored sealed blobs in the data dir or Redis, and `keys create -c` starts the
name afresh. The files are scanned byte by byte (test_sealed's helpers) once the stack has stopped."""

from __future__ import annotations

import asyncio
import base64
import signal
import subprocess
import sys

import pytest

from stacks import redis_at_rest
import yaml
from test_sealed import files_holding, sealed_stack, stored_records

from hybridsearch.client import GatewayClient
from hybridsearch.client.errors import FailedPrecondition, NotFound
from hybridsearch.security.keys_file import KeysFile
from hybridsearch.runtime.services import Store
from hybridsearch.reconcile.rotate import Rotator
from hybridsearch.v1 import common_pb2, ingest_pb2, search_pb2

pytestmark = [pytest.mark.stack, pytest.mark.timeout(900)]

ROTATED, ERASED = "vault-rot", "vault-gone"
DECLARED = {"sealed": True, "tag_leg": True, "tags_field": "topics",
            "boosts": [{"field": "type", "value": "decision", "fusion": 1.3, "rerank": 1.25}]}
DOCS, OWNERS, TAGS = 200, 4, 5
WORD = "glimmerquoth"  # in every rotated document


def rotated_documents() -> list[ingest_pb2.Document]:
    return [ingest_pb2.Document(
        id=f"r-{i:03d}", title=f"Ledger {i}", text=f"Entry {i}: {WORD} harbour note number {i}.",
        metadata={"owner": f"owner{i % OWNERS}", "topics": f"tag{i % TAGS},common",
                  "type": "decision" if i % 50 == 7 else "note"})
        for i in range(DOCS)]


ERASED_WORDS = ("vexquarmil", "dronfeltish", "plowzibark")


def erased_documents() -> list[ingest_pb2.Document]:
    return [ingest_pb2.Document(id=f"e-{i}", title=f"Tombquill memo {i}",
                                text=f"{ERASED_WORDS[i % 3]} and {ERASED_WORDS[(i + 1) % 3]} filler words here.",
                                metadata={"topics": f"gravetagz-{i % 2}", "owner": f"ghostowner{i % 2}"})
            for i in range(6)]


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    declared = {ROTATED: DECLARED, ERASED: {"sealed": True, "tag_leg": True, "tags_field": "topics"}}
    with sealed_stack(tmp_path_factory.mktemp("sealed-keys"), ("2465", "2627", "2835"), declared,
                      (ROTATED, ERASED)) as running:
        yield running


@pytest.fixture(scope="module")
def client(stack):
    client = GatewayClient(stack.settings.endpoints.addr("gateway"))
    assert client.upsert(ROTATED, rotated_documents(), batch_size=100).documents_written == DOCS
    assert client.upsert(ERASED, erased_documents()).documents_written == 6
    yield client
    client.close()


def keys_of(stack, collection: str):
    return KeysFile(stack.settings.data_dir / "sealing" / "keys.yaml").collection(collection)


def cli(stack, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "hybridsearch.cli", "keys", *args], env=stack.test_env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def run_cli(stack, *args: str) -> tuple[int, str]:
    process = cli(stack, *args)
    out, _ = process.communicate(timeout=300)
    return process.returncode, out


def key_counts(stack, collection: str) -> dict[Store, dict[str, int]]:
    async def counts():
        rotator = Rotator(stack.settings)
        try:
            return await rotator.counts(collection)
        finally:
            await rotator.close()
    return {store: dict(c) for store, c in asyncio.run(counts()).items()}


def bm25(client, query: str, **fields) -> search_pb2.SearchResponse:
    return client.search(search_pb2.SearchRequest(query=query, collection=ROTATED, effort=common_pb2.EFFORT_FAST,
                                                  mode=common_pb2.RETRIEVAL_MODE_BM25, **fields))


def assert_every_document_is_matched(client) -> None:
    """Each owner's filter finds exactly its 50 documents, each tag's filter its 40, the tag leg finds a tag's
    documents, the boost lands on the decisions, and the previews open: whatever key each record is under."""
    found = set()
    for owner in range(OWNERS):
        hits = bm25(client, WORD, top_k=100, filters=[common_pb2.MetadataFilter(field="owner", equals=f"owner{owner}")]).hits
        assert {h.doc_id for h in hits} == {f"r-{i:03d}" for i in range(owner, DOCS, OWNERS)}, owner
        assert all(h.title.startswith("Ledger ") and WORD in h.snippet for h in hits)
        found |= {h.doc_id for h in hits}
    assert len(found) == DOCS
    tagged = bm25(client, WORD, top_k=100, filters=[common_pb2.MetadataFilter(
        field="topics", any_of=common_pb2.StringList(values=["tag2,common", "tag3,common"]))]).hits
    assert {h.doc_id for h in tagged} == {f"r-{i:03d}" for i in range(DOCS) if i % TAGS in (2, 3)}
    others = bm25(client, WORD, top_k=100, filters=[common_pb2.MetadataFilter(field="owner", not_equals="owner0"),
                                                    common_pb2.MetadataFilter(field="owner", not_equals="owner1"),
                                                    common_pb2.MetadataFilter(field="owner", not_equals="owner2")]).hits
    assert {h.doc_id for h in others} == {f"r-{i:03d}" for i in range(3, DOCS, OWNERS)}
    leg = client.search(search_pb2.SearchRequest(query="tag4", collection=ROTATED, effort=common_pb2.EFFORT_FAST,
                                                 top_k=100))
    assert {h.doc_id for h in leg.hits if any(r.leg == common_pb2.LEG_TAG for r in h.legs)} == \
        {f"r-{i:03d}" for i in range(4, DOCS, TAGS)}
    for owner in (1, 3):  # 50 documents each, all fused: the decisions among them boosted (r-007: rotated first)
        boosted = client.search(search_pb2.SearchRequest(
            query=f"{WORD} harbour", collection=ROTATED, top_k=50, effort=common_pb2.EFFORT_FAST, explain=True,
            filters=[common_pb2.MetadataFilter(field="owner", equals=f"owner{owner}")]))
        assert {b.doc_id for b in boosted.explain.boosts} == {f"r-{i:03d}" for i in range(7, DOCS, 50) if i % OWNERS == owner}
    docs = client.get_documents(ROTATED, ["r-000", "r-199"]).documents
    assert [d.text for d in docs] == [f"Entry 0: {WORD} harbour note number 0.", f"Entry 199: {WORD} harbour note number 199."]


def test_a_half_done_rotation_still_matches_every_document_and_its_old_key_cannot_retire(stack, client):
    first = keys_of(stack, ROTATED).active
    code, out = run_cli(stack, "rotate", "-c", ROTATED, "--batch-size", "20", "--max-batches", "3")
    assert code == 3 and "not finished" in out, out
    second = keys_of(stack, ROTATED)
    assert (second.active, second.rotating) != (first, "") and second.active == second.rotating
    counts = key_counts(stack, ROTATED)
    assert counts[Store.BM25] == {second.active: 60, first: DOCS - 60}  # three batches of twenty, bm25 first
    assert counts[Store.VECTOR] == {first: DOCS}
    assert_every_document_is_matched(client)  # records under two keys, hashes of both matched
    doctor = subprocess.run([sys.executable, "-m", "hybridsearch.cli", "doctor"], env={**stack.test_env, "COLUMNS": "250"},
                            capture_output=True, text=True, timeout=120).stdout
    assert f"key {second.active}" in doctor and "bm25 140 of 200 records under an old key" in doctor, doctor
    code, out = run_cli(stack, "retire", "-c", ROTATED, "--key", first)
    assert code == 2 and "still seals records" in out, out
    assert first in keys_of(stack, ROTATED).keys


def test_a_rotation_killed_after_its_first_batch_finishes_when_run_again(stack, client):
    """Runs after the half-done one: the same rotation resumed (no third key), killed, resumed to the end."""
    old, new = keys_of(stack, ROTATED).key_ids[1], keys_of(stack, ROTATED).active
    process = cli(stack, "rotate", "-c", ROTATED, "--batch-size", "10")
    lines = []
    for line in process.stdout:  # a line per batch (no terminal: no bar)
        lines.append(line)
        if "documents resealed" in line:
            process.send_signal(signal.SIGKILL)
            break
    process.wait(timeout=60)
    process.stdout.close()
    assert process.returncode == -signal.SIGKILL and any("resuming the rotation" in x for x in lines), lines
    left = key_counts(stack, ROTATED)
    assert left[Store.VECTOR].get(old), left  # killed half-way: the vector store not done
    assert keys_of(stack, ROTATED).key_ids == [new, old]  # no third key
    code, out = run_cli(stack, "rotate", "-c", ROTATED, "--batch-size", "25")  # its hold taken over at once
    assert code == 0 and f"sealed with key {new}" in out and f"keys retire -c {ROTATED} --key {old}" in out, out
    assert keys_of(stack, ROTATED).rotating == ""
    assert key_counts(stack, ROTATED) == {Store.BM25: {new: DOCS}, Store.VECTOR: {new: DOCS}}
    # every record read back from both stores is sealed with the new key, nothing lost
    async def read_back():
        rotator = Rotator(stack.settings)
        try:
            ids = [f"r-{i:03d}" for i in range(DOCS)]
            return {store: (await rotator.stubs[store].GetChunks(common_pb2.GetChunksRequest(
                collection=ROTATED, doc_ids=ids))).chunks for store in Store}
        finally:
            await rotator.close()
    for store, chunks in asyncio.run(read_back()).items():
        assert len({c.doc_id for c in chunks}) == DOCS and {c.sealed.key_id for c in chunks} == {new}, store
    assert_every_document_is_matched(client)
    code, out = run_cli(stack, "retire", "-c", ROTATED, "--key", old)
    assert code == 0 and f"key {old} of {ROTATED!r} removed" in out, out
    assert keys_of(stack, ROTATED).key_ids == [new]
    assert_every_document_is_matched(client)  # the old key gone, nothing needed it


def test_destroy_erases_at_once_then_drops_and_the_name_starts_afresh(stack, client):
    """Runs last: destroys, drops, starts the name afresh, then stops the stack and scans every file."""
    settings = stack.settings
    word = ERASED_WORDS[0]
    first = client.search(search_pb2.SearchRequest(query=word, collection=ERASED, effort=common_pb2.EFFORT_FAST))
    assert first.hits and first.hits[0].title.startswith("Tombquill memo")
    async def blobs():
        rotator = Rotator(settings)
        try:
            return [c.sealed.blob for store in Store for c in (await rotator.stubs[store].GetChunks(
                common_pb2.GetChunksRequest(collection=ERASED, doc_ids=[f"e-{i}" for i in range(6)]))).chunks]
        finally:
            await rotator.close()
    stored_blobs = asyncio.run(blobs())  # the sealed records as the stores hold them
    assert len(stored_blobs) == 12
    process = subprocess.run([sys.executable, "-m", "hybridsearch.cli", "keys", "destroy", "-c", ERASED],
                             env=stack.test_env, input="n\n", capture_output=True, text=True, timeout=120)
    assert process.returncode == 1 and keys_of(stack, ERASED).destroyed is None  # asked, and refused: nothing done
    code, out = run_cli(stack, "destroy", "-c", ERASED, "--yes")
    assert code == 0 and "destroyed at" in out and "dropped" in out, out
    at = keys_of(stack, ERASED).destroyed.at
    reason = f"collection '{ERASED}' was erased: its key was destroyed at {at}"
    with pytest.raises(FailedPrecondition, match=reason):
        client.search(search_pb2.SearchRequest(query=word, collection=ERASED, effort=common_pb2.EFFORT_FAST))
    with pytest.raises(FailedPrecondition, match=reason):
        client.get_documents(ERASED, ["e-0"])
    with pytest.raises(FailedPrecondition, match=reason):
        client.upsert(ERASED, [ingest_pb2.Document(id="x", text="anything at all")])
    # a fresh start of the name: a new key, new documents, none of the old ones
    code, out = run_cli(stack, "create", "-c", ERASED)
    assert code == 0, out
    assert client.upsert(ERASED, [ingest_pb2.Document(id="fresh", text="a brand new wurbleton note")]).documents_written == 1
    assert [h.doc_id for h in client.search(search_pb2.SearchRequest(
        query="wurbleton", collection=ERASED, effort=common_pb2.EFFORT_FAST)).hits] == ["fresh"]
    assert client.get_documents(ERASED, ["e-0"]).missing == ["e-0"]
    with pytest.raises(NotFound):
        client.search(search_pb2.SearchRequest(query=word, collection="vault-never", effort=common_pb2.EFFORT_FAST))
    # the files: nothing of the erased collection, in clear or sealed
    _, values = redis_at_rest(settings)
    stack.stop()
    root = settings.data_dir
    markers = [*ERASED_WORDS, "Tombquill memo", "gravetagz-0", "gravetagz-1", "ghostowner0", "ghostowner1"]
    for marker in markers:
        assert marker.encode() not in values, marker
        assert files_holding(root, marker) == set(), marker
    files = [p.read_bytes() for p in root.rglob("*") if p.is_file()]
    fresh = stored_records(root / "bm25-tantivy" / ERASED)  # the name's new index (decompressed): the new record
    assert b'"fresh' in fresh and b'"e-0' not in fresh
    for blob in stored_blobs:  # as stored (base64 in the payloads) and raw
        for form in (blob, base64.b64encode(blob)):
            assert form not in values and form not in fresh and not any(form in data for data in files)
    assert yaml.safe_load((root / "sealing" / "keys.yaml").read_text())["collections"][ERASED].get("keys")
