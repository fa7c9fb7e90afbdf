import pytest

from hybridsearch.config.settings import Settings
from hybridsearch.contract.errors import InvalidArgument
from hybridsearch.gateway.query.request import plan_search
from hybridsearch.v1 import common_pb2, search_pb2


def test_defaults():
    plan = plan_search(search_pb2.SearchRequest(query="q"), Settings())
    assert (plan.top_k, plan.collection, plan.mode, plan.effort) == (10, "default", common_pb2.RETRIEVAL_MODE_HYBRID, common_pb2.EFFORT_BALANCED)
    assert plan.rerank_requested is None
    assert plan.fusion.rrf_k == 60
    assert plan.language == ""  # expansion detects it
    assert plan_search(search_pb2.SearchRequest(query="q", language=" DE"), Settings()).language == "de"


def test_the_score_floor_is_the_min_score_of_a_request_that_sets_none():
    settings = Settings(query={"default_min_score": 0.03})
    plan = lambda **kw: plan_search(search_pb2.SearchRequest(query="q", **kw), settings)  # noqa: E731
    assert plan().min_score == 0.03
    assert plan(min_score=0.5).min_score == 0.5
    assert plan(no_floor=True).min_score == 0.0
    assert plan(min_score=0.5, no_floor=True).min_score == 0.5  # the request's own min_score still applies
    assert plan_search(search_pb2.SearchRequest(query="q"), Settings(query={"default_min_score": 0.0})).min_score == 0.0


@pytest.mark.parametrize("request_kwargs,message", [
    ({"query": ""}, "query is empty"),
    ({"query": "   "}, "query is empty"),
    ({"query": "x" * 100_000}, "limit is 8192"),
    ({"query": "q", "top_k": 0}, "top_k must be 1-100"),
    ({"query": "q", "top_k": 10_000}, "top_k must be 1-100"),
    ({"query": "q", "offset": -1}, "offset"),
    ({"query": "q", "collection": "Bad Name!"}, "collection"),
    ({"query": "q", "min_score": 2.0}, "min_score"),
    ({"query": "q", "filters": [common_pb2.MetadataFilter(field="", equals="x")]}, "filters[0].field"),
    ({"query": "q", "filters": [common_pb2.MetadataFilter(field="lang")]}, "no condition"),
    ({"query": "q", "filters": [common_pb2.MetadataFilter(field="lang", any_of=common_pb2.StringList())]}, "empty"),
    ({"query": "q", "language": "klingon"}, "language 'klingon' is not supported"),
])
def test_invalid_requests(request_kwargs, message):
    with pytest.raises(InvalidArgument, match=None) as err:
        plan_search(search_pb2.SearchRequest(**request_kwargs), Settings())
    assert message in str(err.value)


def test_fusion_override_is_validated_and_applied():
    from hybridsearch.v1 import fusion_pb2

    plan = plan_search(search_pb2.SearchRequest(query="q", fusion=fusion_pb2.FusionConfig(
        method=common_pb2.FUSION_METHOD_LINEAR, bm25_weight=0.7)), Settings())
    assert plan.fusion.method.value == "linear" and plan.fusion.leg_weights["bm25"] == pytest.approx(0.7)
    with pytest.raises(InvalidArgument):
        plan_search(search_pb2.SearchRequest(query="q", fusion=fusion_pb2.FusionConfig(rrf_k=-1)), Settings())


@pytest.mark.parametrize("effort, expand, expands, rocchio", [
    (common_pb2.EFFORT_FAST, None, False, False),
    (common_pb2.EFFORT_BALANCED, None, True, True),
    (common_pb2.EFFORT_FAST, True, True, True),
    (common_pb2.EFFORT_THOROUGH, False, False, False),
])
def test_expand_overrides_the_effort(effort, expand, expands, rocchio):
    request = search_pb2.SearchRequest(query="q", effort=effort)
    if expand is not None:
        request.expand = expand
    plan = plan_search(request, Settings())
    assert (plan.expand, plan.expands, plan.rocchio) == (expand, expands, rocchio)


def test_fuzzy_is_the_requests_else_the_collections_default():
    settings = Settings(collections={"notes": {"fuzzy": True}})
    assert plan_search(search_pb2.SearchRequest(query="q"), settings).fuzzy is False
    assert plan_search(search_pb2.SearchRequest(query="q", collection="notes"), settings).fuzzy is True
    assert plan_search(search_pb2.SearchRequest(query="q", collection="notes", fuzzy=False), settings).fuzzy is False
    assert plan_search(search_pb2.SearchRequest(query="q", fuzzy=True), settings).fuzzy is True
