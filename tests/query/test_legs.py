"""The leg table (query.legs): one row per leg, read by fusion, settings, the gateway's registry, metrics and
calibration."""

from __future__ import annotations

from hybridsearch.query import legs

from hybridsearch.runtime import metrics
from hybridsearch.config.search import FusionSettings
from hybridsearch.v1 import common_pb2


def test_every_named_leg_has_one_row_and_names_are_keys():
    assert {s.value for s in legs.SPECS} == set(common_pb2.Leg.values()) - {common_pb2.LEG_UNSPECIFIED}
    assert len(legs.names()) == len(set(legs.names())) == len({s.value for s in legs.SPECS})
    assert all(legs.NAME.fullmatch(name) for name in legs.names())
    # The names are the enum's, lower case: what an explain line or a metric label already said.
    assert [legs.name_of(s.value) for s in legs.SPECS] == [
        common_pb2.Leg.Name(s.value).removeprefix("LEG_").lower() for s in legs.SPECS]


def test_a_value_without_a_row_has_a_name_and_the_default_weights():
    assert legs.name_of(99) == "leg_99" and legs.spec_named("leg_99") is None
    assert legs.default_weight("leg_99", rrf=False) == legs.DEFAULT_WEIGHT == 0.5
    assert legs.default_weight("leg_99", rrf=True) == legs.DEFAULT_RRF_WEIGHT == 1.0


def test_the_settings_defaults_are_the_tables():
    assert FusionSettings().leg_weights == legs.default_weights() == {"bm25": 0.5, "vector": 0.5, "tag": 0.5, "graph": 0.25}
    assert FusionSettings().rrf_leg_weights == legs.default_rrf_weights() == {"bm25": 1.0, "vector": 1.0, "tag": 1.0,
                                                                               "graph": 0.25}


def test_the_old_names_are_frozen_onto_rows():
    assert set(legs.LEGACY) == {"bm25_weight", "vector_weight", "tag_weight", "rrf_bm25_weight", "rrf_vector_weight",
                                "rrf_tag_weight", "graph_weight"}
    assert all(legs.spec_named(leg) and set(attrs) <= set(legs.MAPS) for leg, attrs in legs.LEGACY.values())
    assert legs.legacy_entries({"graph_weight": 0.1, "rrf_tag_weight": 2.0, "bm25_weight": None}) == {
        "leg_weights": {"graph": 0.1}, "rrf_leg_weights": {"graph": 0.1, "tag": 2.0}}


def test_the_bonus_legs_and_the_degradable_parts_come_from_the_table():
    assert legs.bonus_values() == {common_pb2.LEG_BM25, common_pb2.LEG_VECTOR}
    assert metrics.DEGRADABLE_LEGS == (*legs.names(), *metrics.NON_LEG_PARTS)
    assert set(metrics.DEGRADABLE_LEGS) == {"bm25", "vector", "tag", "graph", "expansion", "rerank", "fusion"}
