"""The leg registry (gateway.query.legs): one row per proto Leg, which plans use which leg, which queries it takes."""

import pytest

from hybridsearch.config.collections import CollectionConfig
from hybridsearch.config.settings import Settings
from hybridsearch.query import legs
from hybridsearch.gateway.query.legs.registry import LEGS, build
from hybridsearch.gateway.query.request import SHOWN_FIELDS, plan_search
from hybridsearch.v1 import common_pb2, search_pb2

BM25, VECTOR, TAG = common_pb2.LEG_BM25, common_pb2.LEG_VECTOR, common_pb2.LEG_TAG
HYBRID, ONLY_BM25, ONLY_VECTOR = (common_pb2.RETRIEVAL_MODE_HYBRID, common_pb2.RETRIEVAL_MODE_BM25,
                                  common_pb2.RETRIEVAL_MODE_VECTOR)
K = common_pb2


def settings(**collections) -> Settings:
    return Settings(collections={name: CollectionConfig(**body) for name, body in collections.items()})


def plan(mode=HYBRID, collection="default", effort=common_pb2.EFFORT_BALANCED, s=None, **request):
    return plan_search(search_pb2.SearchRequest(query="postgres indexing", mode=mode, collection=collection,
                                                effort=effort, **request), s or Settings())


def test_every_leg_is_keyed_by_its_own_enum_with_a_unique_name():
    assert all(key == leg.leg for key, leg in LEGS.items())
    assert len({leg.name for leg in LEGS.values()}) == len(LEGS)
    assert set(LEGS) == {BM25, VECTOR, TAG}  # LEG_GRAPH runs after fusion (gateway.query.graph), not beside these


def test_the_registry_is_the_leg_tables_rows_that_name_a_gateway_class():
    assert {(leg.leg, leg.name) for leg in LEGS.values()} == {(s.value, s.name) for s in legs.SPECS if s.gateway}


def test_a_new_row_is_a_new_leg_of_the_registry():
    """Registering a leg is its module and one row: the registry builds the row's class with its value and name."""
    fake = legs.LegSpec("fake", 99, weight=0.3, rrf_weight=2.0, gateway="hybridsearch.gateway.query.legs.tag:TagLeg")
    built = build((*legs.SPECS, fake))
    assert built[99].leg == 99 and built[99].name == "fake" and built[99].kinds == LEGS[TAG].kinds
    assert set(built) == {BM25, VECTOR, TAG, 99}


@pytest.mark.parametrize("mode,used", [(HYBRID, {BM25, VECTOR}), (ONLY_BM25, {BM25}), (ONLY_VECTOR, {VECTOR})])
def test_which_legs_a_plan_uses(mode, used):
    assert {k for k, leg in LEGS.items() if leg.used_by(plan(mode))} == used


def test_the_tag_leg_runs_for_hybrid_searches_of_collections_that_declare_it():
    s = settings(notes={"tag_leg": True})
    assert LEGS[TAG].used_by(plan(collection="notes", s=s))
    assert not LEGS[TAG].used_by(plan(ONLY_BM25, collection="notes", s=s))
    assert not LEGS[TAG].used_by(plan(collection="other", s=s))


def test_query_kinds_go_to_the_legs_written_for_them():
    assert LEGS[BM25].kinds == {K.QUERY_KIND_ORIGINAL, K.QUERY_KIND_LEXICAL_VARIANT}
    assert LEGS[VECTOR].kinds == {K.QUERY_KIND_ORIGINAL, K.QUERY_KIND_SEMANTIC_VARIANT, K.QUERY_KIND_HYDE}
    assert LEGS[TAG].kinds == {K.QUERY_KIND_ORIGINAL}


def test_leg_requests():
    s = Settings()
    base = lambda: common_pb2.LegSearchRequest(collection="c", limit=100, queries=[  # noqa: E731
        common_pb2.LegQuery(text="q", kind=K.QUERY_KIND_ORIGINAL)])
    assert LEGS[TAG].request(base(), plan(), s).limit == 75  # Gnosis: 75% of the vector pool
    assert LEGS[VECTOR].request(base(), plan(), s).feedback_docs == s.vector.feedback_docs
    assert LEGS[VECTOR].request(base(), plan(effort=common_pb2.EFFORT_FAST), s).feedback_docs == 0
    assert LEGS[BM25].request(base(), plan(), s) == base()


def test_a_plan_asks_the_legs_for_the_fields_its_boosts_and_tags_read():
    s = settings(notes={"boosts": [{"field": "type", "value": "decision", "fusion": 1.3},
                                   {"field": "status", "value": "done", "fusion": 0.6}], "tags_field": "topics"})
    # the boosts' fields, the tags field (the answer's tag distribution), and what every hit shows (path, type...)
    assert plan(collection="notes", s=s).metadata_fields == sorted({"status", "topics", "type", *SHOWN_FIELDS})
    assert plan(s=s).metadata_fields == sorted({"tags", *SHOWN_FIELDS})
    assert plan(s=s, return_metadata=["author"]).metadata_fields == sorted({"tags", "author", *SHOWN_FIELDS})
