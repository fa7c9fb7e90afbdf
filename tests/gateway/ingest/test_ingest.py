"""What the gateway sends each store on ingest: shared chunks, or the vector leg's own passages."""

from __future__ import annotations

import pytest

from hybridsearch.config.settings import Settings
from hybridsearch.gateway.ingest.chunks import store_requests
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


def test_documents_are_validated_with_every_limit_named():
    from hybridsearch.contract.limits import MAX_TEXT_CHARS
    from hybridsearch.contract.errors import InvalidArgument
    from hybridsearch.gateway.ingest.checks import validate_documents

    assert [d.id for d in validate_documents([SHORT, LONG, SHORT])] == ["short", "long"]
    cases = [
        (ingest_pb2.Document(id="d\n", text="x"), "document id"),
        (ingest_pb2.Document(id="d", text="x" * (MAX_TEXT_CHARS + 1)), f"the limit is {MAX_TEXT_CHARS}"),
        (ingest_pb2.Document(id="d", text="x", metadata={"a.b": "v"}), "metadata key 'a.b' is invalid"),
        (ingest_pb2.Document(id="d", text="x", metadata={"k\n": "v"}), "metadata key"),
    ]
    for doc, message in cases:
        with pytest.raises(InvalidArgument, match=None) as err:
            validate_documents([doc])
        assert message in str(err.value)


def test_a_batch_too_large_for_the_stores_is_refused_before_sending():
    from hybridsearch.contract.limits import STORE_UPSERT_BYTES
    from hybridsearch.contract.errors import InvalidArgument
    from hybridsearch.gateway.ingest.checks import check_store_request

    # Metadata rides on every chunk: 7 KiB of it on each of ~1250 chunks of one-letter words is 9 MiB.
    doc = ingest_pb2.Document(id="d", text="a " * 500_000, metadata={f"k{i}": "v" * 1000 for i in range(7)})
    docs = [ingest_pb2.Document(id=f"d{i}", text=doc.text, metadata=doc.metadata) for i in range(4)]
    bm25, _ = store_requests("c", docs, Settings())
    with pytest.raises(InvalidArgument, match=f"the limit is {STORE_UPSERT_BYTES // 2**20} MiB"):
        check_store_request(bm25)
    check_store_request(store_requests("c", [SHORT], Settings())[0])


def test_store_failures_tell_retry_from_refusal():
    import grpc

    from hybridsearch.gateway.ingest.both_stores import store_failure

    from hybridsearch.gateway.ingest.servicer import stream_progress

    def rpc_error(code):
        return grpc.aio.AioRpcError(code, grpc.aio.Metadata(), grpc.aio.Metadata(), details="boom")

    assert store_failure([object(), object()]) is None
    assert store_failure([rpc_error(grpc.StatusCode.UNAVAILABLE), object()]).code == grpc.StatusCode.UNAVAILABLE
    refused = store_failure([object(), rpc_error(grpc.StatusCode.INVALID_ARGUMENT)], "delete")
    assert refused.code == grpc.StatusCode.INVALID_ARGUMENT and str(refused).startswith("delete refused")
    assert stream_progress(0, 0, "") == ("nothing of this stream was committed",
                                         (("committed-batches", "0"), ("committed-documents", "0"), ("last-committed-id-bin", b"")))
    assert stream_progress(2, 7, "x")[0] == "2 earlier batches were committed (7 documents, the last 'x')"


def test_the_client_batches_by_count_and_bytes():
    from hybridsearch.client import upsert_requests

    docs = [ingest_pb2.Document(id=f"d{i}", text="x" * 1000) for i in range(10)]
    assert [len(r.documents) for r in upsert_requests("c", docs, 4)] == [4, 4, 2]
    requests = list(upsert_requests("c", docs, 64, max_bytes=16 * 1024 + 3100))
    assert [len(r.documents) for r in requests] == [3, 3, 3, 1]
    assert all(r.ByteSize() <= 16 * 1024 + 3100 for r in requests)


def test_chunks_carry_their_source_span_counted_from_the_file():
    """Lines and characters count from the top of the file: front matter a reader took out still counts."""
    from hybridsearch.gateway.ingest.chunks import document_chunks

    text = "# Title\n\nfirst paragraph\nstill first\n\nsecond paragraph\n"
    plain = document_chunks(ingest_pb2.Document(id="d", text=text), 4, 0)
    assert [(c.text, c.span.start_line, c.span.end_line) for c in plain] == [
        ("first paragraph\nstill first", 3, 4), ("second paragraph", 6, 6)]
    assert text[plain[1].span.start_char:plain[1].span.end_char] == "second paragraph"
    shifted = document_chunks(ingest_pb2.Document(id="d", text=text, source_line_offset=4, source_char_offset=30), 4, 0)
    assert [(c.span.start_line, c.span.start_char) for c in shifted] == [(7, plain[0].span.start_char + 30),
                                                                        (10, plain[1].span.start_char + 30)]
    assert shifted[0].content_hash != plain[0].content_hash


def test_a_reader_s_sections_become_the_chunks_with_their_own_fields():
    from hybridsearch.gateway.ingest.chunks import document_chunks

    code = "import os\n\ndef parse(x):\n    return x\n\nclass Box:\n    pass\n"
    doc = ingest_pb2.Document(id="m.py", title="m.py", text=code, metadata={"path": "m.py"}, sections=[
        ingest_pb2.DocumentSection(start=code.index("def"), end=code.index("class") - 1, heading="def parse",
                                   metadata={"symbol": "parse"}),
        ingest_pb2.DocumentSection(start=code.index("class"), end=len(code), heading="class Box",
                                   metadata={"symbol": "Box"}),
    ])
    chunks = document_chunks(doc, 400, 40)
    assert [(c.heading, c.text, c.metadata["symbol"], c.metadata["path"], c.span.start_line, c.span.end_line)
            for c in chunks] == [("def parse", "def parse(x):\n    return x", "parse", "m.py", 3, 4),
                                 ("class Box", "class Box:\n    pass", "Box", "m.py", 6, 7)]


def test_sections_outside_the_text_or_out_of_order_are_refused():
    from hybridsearch.contract.errors import InvalidArgument
    from hybridsearch.gateway.ingest.checks import validate_documents

    for sections in ([(0, 99)], [(5, 8), (2, 4)], [(3, 2)]):
        doc = ingest_pb2.Document(id="d", text="0123456789", sections=[
            ingest_pb2.DocumentSection(start=a, end=b) for a, b in sections])
        with pytest.raises(InvalidArgument, match="sections"):
            validate_documents([doc])
    bad_key = ingest_pb2.Document(id="d", text="0123456789", sections=[
        ingest_pb2.DocumentSection(start=0, end=5, metadata={"a.b": "v"})])
    with pytest.raises(InvalidArgument, match="metadata key"):
        validate_documents([bad_key])
