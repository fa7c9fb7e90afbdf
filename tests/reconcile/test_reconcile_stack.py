"""`hybridsearch reconcile` on a real stack: drift made behind the gateway's back (writes and deletes sent
to one store only, as an unacknowledged write leaves them) is found, reported and repaired from the other
store; a second run finds nothing; the stores then agree document for document."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from stacks import store_call

from hybridsearch.gateway.ingest.chunks import document_chunks
from hybridsearch.security.acl import readers_key_of
from hybridsearch.v1 import common_pb2, ingest_pb2

pytestmark = pytest.mark.stack
COLLECTION = "drift"


def docs(prefix: str, n: int, version: str = "v1") -> list[ingest_pb2.Document]:
    return [ingest_pb2.Document(id=f"{prefix}{i}", title=f"{prefix}{i} {version}",
                                text=f"reconcile test document {i} {version} with a few words") for i in range(n)]


def listing(stack, store: str, readers: bool = False) -> dict[str, str]:
    pages = store_call(stack, store, "ListDocuments", common_pb2.ListDocumentsRequest(collection=COLLECTION), stream=True)
    return {d.doc_id: (d.content_hash, d.readers) if readers else d.content_hash for p in pages for d in p.documents}


def write_to(stack, store: str, documents, written_at_ms: int) -> None:
    chunks = [c for d in documents for c in document_chunks(d, 400, 40, written_at_ms=written_at_ms)]
    store_call(stack, store, "UpsertChunks", common_pb2.UpsertChunksRequest(collection=COLLECTION, chunks=chunks))


def reconcile(stack, *flags) -> dict:
    out = stack.settings.data_dir / "reconcile.json"
    proc = subprocess.run([sys.executable, "-m", "hybridsearch.cli", "reconcile", "-c", COLLECTION, "--json-out", str(out), *flags],
                          capture_output=True, text=True, timeout=120, env=stack.test_env)  # this stack's settings
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(out.read_text())[0]


def test_drift_is_found_and_repaired(stack, gateway):
    gateway.index(COLLECTION, docs("ok", 30))
    write_to(stack, "bm25", docs("bm25-only", 3), 1)                 # an upsert that reached BM25 only
    write_to(stack, "vector", docs("vector-only", 2), 1)             # ... or the vector store only
    write_to(stack, "vector", docs("ok", 4, "v2"), 2**50)            # a newer version in the vector store
    regrouped = docs("ok", 22)[20:]                                  # new readers, same text, the vector store only
    for d in regrouped:
        d.acl.allow.append("group:hr")
    write_to(stack, "vector", regrouped, 2**50)
    store_call(stack, "bm25", "DeleteDocuments",                     # a delete that reached BM25 only
               common_pb2.DeleteDocumentsRequest(collection=COLLECTION, doc_ids=["ok10", "ok11"]))

    found = reconcile(stack, "--dry-run")
    assert found["found"] == {"missing": 7, "diverged": 6, "torn": 0, "unrepairable": 0, "consistent": 22}
    assert found["repaired"] == 0 and listing(stack, "bm25") != listing(stack, "vector")

    fixed = reconcile(stack)
    assert fixed["repaired"] == 13
    assert listing(stack, "bm25", readers=True) == listing(stack, "vector", readers=True)
    assert listing(stack, "bm25", readers=True)["ok20"][1] == readers_key_of(regrouped[0].acl)  # the newer readers won
    bm25, vector = listing(stack, "bm25"), listing(stack, "vector")
    assert bm25 == vector and len(bm25) == 35
    v2 = {d.id: d for d in docs("ok", 4, "v2")}
    assert all(bm25[i] == document_chunks(v2[i], 400, 40)[0].content_hash for i in v2)  # the newer write won

    again = reconcile(stack)
    assert again["found"]["consistent"] == 35 and again["repaired"] == 0
