"""build_engine: the configured engine, with the collections' declared text fields."""

from __future__ import annotations

import pytest

from hybridsearch.bm25.service import build_engine
from hybridsearch.config.settings import Settings


@pytest.fixture(autouse=True)
def no_declared_collections(monkeypatch):
    """Only what a test declares (a session stack may have put HYBRIDSEARCH_COLLECTIONS in the environment)."""
    monkeypatch.delenv("HYBRIDSEARCH_COLLECTIONS", raising=False)
    monkeypatch.delenv("HYBRIDSEARCH_COLLECTIONS_FILE", raising=False)


def test_bm25s_refuses_collections_that_declare_text_fields(tmp_path):
    settings = Settings(data_dir=tmp_path, bm25={"engine": "bm25s"}, collections={"code": {"fields": {"summary": 2.0}}})
    with pytest.raises(ValueError, match=r"bm25s does not index text fields.*\['code'\].*embedded"):
        build_engine(settings)
    assert build_engine(Settings(data_dir=tmp_path, bm25={"engine": "bm25s"}, collections={"notes": {"fuzzy": True}}))


def test_the_embedded_engine_reads_each_collections_fields(tmp_path):
    settings = Settings(data_dir=tmp_path, collections={"code": {"fields": {"summary": 2.0, "path": 0.5}}})
    engine = build_engine(settings)
    assert engine.fields_of("code") == {"summary": 2.0, "path": 0.5}
    assert engine.fields_of("other") == {}


async def test_correct_over_grpc_and_its_bad_input(tmp_path):
    import grpc

    from loopback import refused, store_stub
    from hybridsearch.bm25.tantivy_engine import TantivyBm25Engine
    from hybridsearch.contract.limits import MAX_QUERY_CHARS
    from hybridsearch.v1 import bm25_pb2, common_pb2

    engine = TantivyBm25Engine(tmp_path, "porter", "en_plus")
    await engine.upsert("c", [common_pb2.Chunk(chunk_id="a#0", doc_id="a", text="protein folding", content_hash="h")])
    async with store_stub("bm25", engine) as stub:
        reply = await stub.Correct(bm25_pb2.CorrectRequest(collection="c", query="protien folding"), timeout=10)
        assert reply.query == "protein folding"
        for bad, message in [(bm25_pb2.CorrectRequest(collection="Bad Name!", query="x"), "collection"),
                             (bm25_pb2.CorrectRequest(collection="c", query="x" * (MAX_QUERY_CHARS + 1)), "limit")]:
            err = await refused(stub.Correct(bad, timeout=10))
            assert err.code() == grpc.StatusCode.INVALID_ARGUMENT and message in err.details()


async def test_hits_below_the_text_depth_come_with_ids_scores_and_metadata_only(tmp_path):
    """A leg search's text_depth reaches the engine: hits ranked below it carry no title or text (the gateway fills
    the few it shows from the store), the same ids, ranks, scores, metadata and spans as without it."""
    from loopback import store_stub
    from hybridsearch.bm25.tantivy_engine import TantivyBm25Engine
    from hybridsearch.v1 import common_pb2

    engine = TantivyBm25Engine(tmp_path, "porter", "en_plus")
    await engine.upsert("c", [common_pb2.Chunk(
        chunk_id=f"d{i}#0", doc_id=f"d{i}", title=f"title {i}", text="lighthouse " * (i + 1) + "keepers",
        metadata={"year": str(2000 + i)}, content_hash=f"h{i}", span=common_pb2.SourceSpan(start_char=i, end_char=i + 9, start_line=1, end_line=2))
        for i in range(8)])
    request = common_pb2.LegSearchRequest(collection="c", queries=[common_pb2.LegQuery(text="lighthouse")],
                                          limit=8, metadata_fields=["year"])
    (built,) = await engine.search("c", ["lighthouse"], 8, [], ("year",), text_depth=3)
    assert [bool(h.text) for h in built] == [True] * 3 + [False] * 5  # never built, not built and cleared
    async with store_stub("bm25", engine) as stub:
        whole = (await stub.Search(request, timeout=10)).lists[0].hits
        request.text_depth = 3
        shallow = (await stub.Search(request, timeout=10)).lists[0].hits
    assert [(h.chunk_id, h.rank, h.score, dict(h.metadata), h.span) for h in shallow] == \
        [(h.chunk_id, h.rank, h.score, dict(h.metadata), h.span) for h in whole] and len(whole) == 8
    assert [bool(h.text and h.title) for h in shallow] == [True] * 3 + [False] * 5
    assert all(h.text and h.span.end_char for h in whole)
