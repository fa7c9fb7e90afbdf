"""The request builders the clients share: keyword options to protos, and back to words."""

from __future__ import annotations

import pytest

from hybridsearch.client import Not, document, explain_lines, search_request
from hybridsearch.client.requests import enum_word
from hybridsearch.v1 import common_pb2, fusion_pb2, search_pb2


def test_defaults_leave_the_server_to_decide():
    request = search_request("q")
    assert request.collection == "default" and not request.HasField("top_k") and not request.HasField("rerank")
    assert (request.mode, request.effort, request.offset) == (0, 0, 0)


def test_keywords_map_to_the_proto():
    request = search_request("q", collection="c", top_k=5, mode="bm25", effort="THOROUGH", rerank=False,
                             fusion={"rrf_k": 30, "bm25_weight": 0.0}, offset=10, explain=True)
    assert (request.top_k, request.mode, request.effort) == (5, common_pb2.RETRIEVAL_MODE_BM25, common_pb2.EFFORT_THOROUGH)
    assert request.HasField("rerank") and not request.rerank
    assert request.fusion.rrf_k == 30 and request.fusion.HasField("bm25_weight")  # 0 is a value, not "unset"
    assert request.offset == 10 and request.explain
    keyed = search_request("q", fusion={"leg_weights": {"bm25": 0.0, "tag": 0.25}})
    assert dict(keyed.fusion.leg_weights) == {"bm25": 0.0, "tag": 0.25}


def test_filters_from_a_mapping():
    filters = search_request("q", filters={"lang": "en", "team": ["a", "b"], "status": Not("draft")}).filters
    assert [f.WhichOneof("condition") for f in filters] == ["equals", "any_of", "not_equals"]
    assert list(filters[1].any_of.values) == ["a", "b"] and filters[2].not_equals == "draft"


def test_unknown_mode_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown mode 'dense'; one of bm25, vector, hybrid"):
        search_request("q", mode="dense")


def test_newer_fields_pass_through_by_name():
    field = next(f for f in search_pb2.SearchRequest.DESCRIPTOR.fields if f.name == "explain")
    assert search_request("q", **{field.name: True}).explain


def test_document_metadata_values_are_strings():
    doc = document("a", "text", title="T", year=2024)
    assert (doc.id, doc.title, doc.text, dict(doc.metadata)) == ("a", "T", "text", {"year": "2024"})


def test_document_files_a_metadata_mapping_as_its_fields():
    """`metadata={...}` once stored one field named "metadata" holding the dict's repr."""
    doc = document("t1", "text", metadata={"type": "decision", "tags": ["postgres", "database"]}, lang="en")
    assert dict(doc.metadata) == {"type": "decision", "tags": "postgres,database", "lang": "en"}


def test_document_refuses_what_it_would_misfile():
    with pytest.raises(ValueError, match="'extra' holds a mapping; metadata is flat"):
        document("t1", "text", extra={"a": "b"})
    with pytest.raises(ValueError, match="lang given both in metadata= and as keywords"):
        document("t1", "text", metadata={"lang": "en"}, lang="de")


def test_explain_lines_read_an_answer():
    response = search_pb2.SearchResponse(
        legs=[search_pb2.LegStatus(name="bm25", state=search_pb2.LEG_STATE_OK, reason="tantivy")],
        explain=search_pb2.Explanation(timings=[search_pb2.StageTiming(stage="fusion", ms=1.25)]),
        notices=["reranker skipped"])
    assert explain_lines(response) == ["bm25: ok (tantivy)", "timings: fusion 1.2 ms", "notice: reranker skipped"]


def test_explain_lines_name_the_fusion_weights_by_leg_once():
    """The applied config carries each leg weight twice (the map, and the old named field for old readers):
    the lines show the maps; a leg the table has no row for is named by its value."""
    fusion = fusion_pb2.FusionConfig(method=common_pb2.FUSION_METHOD_RRF, rrf_k=60, bm25_weight=0.5,
                                     leg_weights={"vector": 0.5, "bm25": 0.5}, rrf_leg_weights={"bm25": 1.0})
    response = search_pb2.SearchResponse(explain=search_pb2.Explanation(
        fusion=fusion, leg_lists=[common_pb2.RankedList(leg=99, kind=common_pb2.QUERY_KIND_ORIGINAL, weight=1.0)]))
    assert explain_lines(response)[:2] == [
        "list leg_99/original weight 1: 0 hits",
        "fusion: method rrf, rrf_k 60, leg_weights bm25 0.5 vector 0.5, rrf_leg_weights bm25 1"]


def test_explain_lines_name_enums_and_round_float32():
    """The fusion line names the method (not `method 4`) and shows a float32 as it was written (0.7, not
    0.699999988079071); a method this build has no name for stays a number."""
    fusion = fusion_pb2.FusionConfig(method=common_pb2.FUSION_METHOD_ZSCORE, hyde_weight=0.7, variant_weight=0.35)
    response = search_pb2.SearchResponse(explain=search_pb2.Explanation(fusion=fusion))
    assert explain_lines(response)[0] == "fusion: method zscore, variant_weight 0.35, hyde_weight 0.7"
    response.explain.fusion.method = 42
    assert explain_lines(response)[0].startswith("fusion: method 42,")


def test_enum_word_strips_the_enums_own_prefix():
    assert enum_word(common_pb2.FusionMethod, common_pb2.FUSION_METHOD_DBSF) == "dbsf"
    assert enum_word(search_pb2.LegState, search_pb2.LEG_STATE_FALLBACK) == "fallback"
    assert enum_word(common_pb2.QueryKind, common_pb2.QUERY_KIND_ORIGINAL) == "original"
    assert enum_word(common_pb2.RetrievalMode, common_pb2.RETRIEVAL_MODE_BM25) == "bm25"
