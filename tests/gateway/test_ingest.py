"""What the gateway sends each store on ingest: shared chunks, or the vector leg's own passages."""

from __future__ import annotations

import pytest

from hybridsearch.common.config import Settings
from hybridsearch.gateway.ingest import store_requests
from hybridsearch.v1 import ingest_pb2

LONG = ingest_pb2.Document(id="long", title="Heat", text=" ".join(f"word{i}" for i in range(900)), metadata={"k": "v"})
SHORT = ingest_pb2.Document(id="short", title="Cold", text="a short note about ice")


def test_by_default_both_stores_get_the_same_chunks():
    bm25, vector = store_requests("c", [LONG, SHORT], Settings())
    assert bm25 is vector
    assert [c.chunk_id for c in bm25.chunks] == ["long#0", "long#1", "long#2", "short#0"]


@pytest.mark.parametrize("words", [0, 400])
def test_vector_chunking_equal_to_the_shared_one_shares_the_request(words):
    bm25, vector = store_requests("c", [LONG], Settings(vector={"chunk_words": words}))
    assert bm25 is vector


def test_vector_passages_are_the_vector_store_s_own():
    bm25, vector = store_requests("c", [LONG, SHORT], Settings(vector={"chunk_words": 128, "chunk_overlap_words": 32}))
    assert len(bm25.chunks) == 4
    passages = [c for c in vector.chunks if c.doc_id == "long"]
    # 900 words of one paragraph: 128-word pieces, each after the first led by the previous piece's
    # last 32 words (so at most 160 words, ~210 tokens: within MiniLM's 256), every word embedded.
    assert len(passages) == 8
    assert [c.position for c in passages] == list(range(8))
    assert all(c.chunk_id == f"long#p{c.position}" for c in passages)  # never confused with a BM25 chunk id
    assert max(len(c.text.split()) for c in passages) == 160
    assert all(b.text.split()[:32] == a.text.split()[-32:] for a, b in zip(passages, passages[1:]))
    assert {w for c in passages for w in c.text.split()} == set(LONG.text.split())
    assert {c.content_hash for c in passages} == {bm25.chunks[0].content_hash}  # same document hash for idempotency
    assert passages[0].title == "Heat" and dict(passages[0].metadata) == {"k": "v"}
    assert [c.chunk_id for c in vector.chunks if c.doc_id == "short"] == ["short#p0"]


def test_empty_batch():
    bm25, vector = store_requests("c", [], Settings(vector={"chunk_words": 128}))
    assert list(bm25.chunks) == [] and list(vector.chunks) == []
