"""Several collections: validation of `collections`, one plan per collection, the cross-collection merge."""

import pytest

from hybridsearch.config.settings import Settings
from hybridsearch.contract.errors import InvalidArgument
from hybridsearch.gateway.query.fanout import MERGE_RRF_K, content_key, key, merge, split_key
from hybridsearch.gateway.query.request import MAX_COLLECTIONS, plan_search
from hybridsearch.v1 import fusion_pb2, search_pb2


def settings() -> Settings:
    return Settings(collections={"notes": {"fuzzy": True, "tags_field": "topics"}, "code": {"graph": True}})


@pytest.mark.parametrize("collections, collection, message", [
    (["notes", "notes"], "", "collections names notes more than once"),
    (["notes", "code"], "other", "collection 'other' is not one of collections"),
    ([f"c{i}" for i in range(MAX_COLLECTIONS + 1)], "", f"the limit is {MAX_COLLECTIONS}"),
    (["notes", "Bad Name"], "", "collection 'Bad Name' is invalid"),
    (["notes", ""], "", "collections has an empty name"),
])
def test_bad_collections_are_refused(collections, collection, message):
    request = search_pb2.SearchRequest(query="q", collections=collections, collection=collection)
    with pytest.raises(InvalidArgument) as err:
        plan_search(request, settings())
    assert message in str(err.value)


def test_each_collection_gets_its_own_plan():
    plan = plan_search(search_pb2.SearchRequest(query="q", collections=["notes", "code"]), settings())
    assert [p.collection for p in plan.parts] == ["notes", "code"]
    assert [(p.fuzzy, p.graph) for p in plan.parts] == [(True, False), (False, True)]  # each its own defaults
    assert plan.collection == "notes" and plan.config_of("code").tags_field == "tags"
    assert plan.config_of("notes").tags_field == "topics"
    primary = plan_search(search_pb2.SearchRequest(query="q", collections=["notes", "code"], collection="code"),
                          settings())
    assert primary.collection == "code" and len(primary.parts) == 2


def test_one_collection_in_collections_is_a_plain_search():
    plan = plan_search(search_pb2.SearchRequest(query="q", collections=["notes"]), settings())
    assert plan.parts == () and plan.collection == "notes" and plan.fuzzy


def hits(*ids: str) -> list[fusion_pb2.FusedHit]:
    return [fusion_pb2.FusedHit(doc_id=i.partition("#")[0], chunk_id=i) for i in ids]


def test_merge_interleaves_by_rank_and_keys_by_collection():
    texts = {}
    merged = merge([("a", hits("x#0", "y#0")), ("b", hits("x#0", "z#0"))], lambda c, i: texts.get((c, i), ""), 10)
    # Same ids in two collections with no text to compare are two hits, told apart by the key.
    assert [m.chunk_id for m in merged] == [key("a", "x#0"), key("b", "x#0"), key("a", "y#0"), key("b", "z#0")]
    assert merged[0].normalized_score == 1.0 and merged[0].fusion_score == pytest.approx(1 / (MERGE_RRF_K + 1))
    assert split_key(merged[1].chunk_id, "a") == ("b", "x#0") and split_key("q#1", "a") == ("a", "q#1")


def test_merge_keeps_the_same_content_once_at_its_better_place():
    texts = {("a", "dup#0"): "Same  text\n", ("b", "copy#3"): "Same text", ("a", "u#0"): "u", ("b", "v#0"): "v"}
    merged = merge([("a", hits("u#0", "dup#0")), ("b", hits("copy#3", "v#0"))], lambda c, i: texts[c, i], 10)
    # b's copy ranks first in its list, a's second: b's copy stays and takes both shares, so it leads.
    assert [m.chunk_id for m in merged] == [key("b", "copy#3"), key("a", "u#0"), key("b", "v#0")]
    assert merged[0].fusion_score == pytest.approx(1 / (MERGE_RRF_K + 1) + 1 / (MERGE_RRF_K + 2))
    assert len(merge([("a", hits("u#0", "dup#0")), ("b", hits("copy#3", "v#0"))], lambda c, i: texts[c, i], 2)) == 2


def test_content_key_ignores_whitespace_only():
    assert content_key(" a  b\n") == content_key("a b") != content_key("a B")
    assert content_key("  ") is None


def run_fan_out(answers: dict[str, bool]):
    """fan_out over collections whose retrieval answers (True) or has no leg answer (False)."""
    import asyncio

    from hybridsearch.gateway.query.fanout import fan_out
    from hybridsearch.gateway.query.pool import Pool
    from hybridsearch.gateway.query.report import FAILED, OK, LegStatus, Report

    async def retrieve(part, report):
        if not answers[part.collection]:
            report.legs["bm25"] = LegStatus(name="bm25", state=FAILED, reason="UNAVAILABLE: down")
            return None
        report.legs["bm25"] = LegStatus(name="bm25", state=OK, reason="tantivy")
        return hits(f"{part.collection}-doc#0"), Pool()

    plan = plan_search(search_pb2.SearchRequest(query="q", collections=list(answers)), settings())
    report = Report()
    found = asyncio.run(fan_out(plan, retrieve, report, 10))
    return (found[0] if found else None), report


def test_a_collection_without_answer_degrades_only_when_another_answered():
    fused, trace = run_fan_out({"notes": False, "code": True})
    assert [split_key(f.chunk_id, "") for f in fused] == [("code", "code-doc#0")]
    assert trace.degraded and {n: s.state for n, s in trace.legs.items()} == {
        "bm25@notes": search_pb2.LEG_STATE_FAILED, "bm25@code": search_pb2.LEG_STATE_OK}
    assert run_fan_out({"notes": False, "code": False})[0] is None
    fused, trace = run_fan_out({"notes": True, "code": True})
    assert len(fused) == 2 and not trace.degraded
