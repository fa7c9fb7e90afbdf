"""Fusion parameters: resolved once (unset means the configured default, 0 is a value, bad values are refused), then used as given.
Leg weights are keyed by leg name; the old named fields are still read onto their leg's entry and still written."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hybridsearch.query import legs
from hybridsearch.config.search import FusionSettings
from hybridsearch.contract.errors import InvalidArgument
from hybridsearch.fusion.methods import FusionMethod, FusionParams, Item, QueryKind, Ranking, fuse
from hybridsearch.fusion.params import (
    METHOD_ENUM, params_from_proto, params_from_settings, params_to_proto, resolve_params,
)
from hybridsearch.v1 import common_pb2, fusion_pb2

BM25, VECTOR, TAG, GRAPH = common_pb2.LEG_BM25, common_pb2.LEG_VECTOR, common_pb2.LEG_TAG, common_pb2.LEG_GRAPH


def test_unset_fields_keep_the_configured_defaults():
    defaults = FusionSettings()
    assert resolve_params(fusion_pb2.FusionConfig(), defaults) == params_from_settings(defaults)


@pytest.mark.parametrize("name", ["variant_weight", "hyde_weight", "top_rank_bonus"])
def test_zero_is_a_value_not_the_default(name):
    params = resolve_params(fusion_pb2.FusionConfig(**{name: 0.0}), FusionSettings())
    assert getattr(params, name) == 0.0
    assert getattr(params_from_settings(FusionSettings()), name) != 0.0


@pytest.mark.parametrize("attr", legs.MAPS)
def test_a_leg_weight_of_zero_is_a_value_and_the_other_legs_keep_theirs(attr):
    params = resolve_params(fusion_pb2.FusionConfig(**{attr: {"bm25": 0.0}}), FusionSettings())
    configured = getattr(params_from_settings(FusionSettings()), attr)
    assert getattr(params, attr) == {**configured, "bm25": 0.0} and configured["bm25"] != 0.0


@pytest.mark.parametrize("value", [-0.1, float("nan"), 1e7])
@pytest.mark.parametrize("config, named", [
    (lambda v: fusion_pb2.FusionConfig(bm25_weight=v), "bm25_weight"),
    (lambda v: fusion_pb2.FusionConfig(leg_weights={"bm25": v}), "leg_weights['bm25']"),
    (lambda v: fusion_pb2.FusionConfig(rrf_leg_weights={"graph": v}), "rrf_leg_weights['graph']"),
])
def test_bad_values_are_invalid(value, config, named):
    with pytest.raises(InvalidArgument, match=re.escape(named)):
        resolve_params(config(value), FusionSettings())  # the gateway's plan
    resolved = params_to_proto(params_from_settings(FusionSettings()))
    resolved.MergeFrom(config(value))
    with pytest.raises(InvalidArgument, match=re.escape(named)):
        params_from_proto(resolved)  # the fusion service


def test_what_was_applied_round_trips():
    params = resolve_params(fusion_pb2.FusionConfig(leg_weights={"vector": 0.0}, rrf_k=10), FusionSettings())
    again = resolve_params(params_to_proto(params), FusionSettings())
    assert again.method == params.method and again.leg_weights["vector"] == 0.0
    # The wire carries float32: equal to that precision.
    numbers = [n for n, v in vars(params).items() if isinstance(v, float)]
    assert [getattr(again, n) for n in numbers] == pytest.approx([getattr(params, n) for n in numbers], rel=1e-6)
    for attr in legs.MAPS:
        assert getattr(again, attr) == pytest.approx(getattr(params, attr), rel=1e-6)


def test_the_service_uses_a_resolved_config_as_given():
    params = resolve_params(fusion_pb2.FusionConfig(rrf_k=7, leg_weights={"tag": 0.0}), FusionSettings())
    given = params_from_proto(params_to_proto(params))
    assert given.rrf_k == 7 and given.leg_weights["tag"] == 0.0 and given.method == params.method
    assert given.leg_weights["bm25"] == pytest.approx(FusionSettings().leg_weights["bm25"])


def test_the_service_refuses_an_unresolved_config():
    with pytest.raises(InvalidArgument, match="not resolved: method, rrf_k"):
        params_from_proto(fusion_pb2.FusionConfig())
    partial = params_to_proto(resolve_params(fusion_pb2.FusionConfig(), FusionSettings()))
    partial.ClearField("hyde_weight")
    with pytest.raises(InvalidArgument, match="hyde_weight unset"):
        params_from_proto(partial)


def test_the_service_weighs_a_leg_the_maps_leave_out_with_its_default():
    """A gateway that does not know a leg sends no weight for it: the fusion service's default, not a refusal."""
    config = params_to_proto(params_from_settings(FusionSettings()))
    del config.leg_weights["tag"]
    config.ClearField("tag_weight")
    assert params_from_proto(config).leg_weights["tag"] == legs.default_weight("tag", rrf=False)


# --- the old named fields ----------------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(legs.LEGACY))
def test_an_old_named_field_is_read_onto_its_legs_entry(name):
    leg, attrs = legs.LEGACY[name]
    params = resolve_params(fusion_pb2.FusionConfig(**{name: 0.125}), FusionSettings())
    configured = params_from_settings(FusionSettings())
    for attr in legs.MAPS:
        assert getattr(params, attr)[leg] == (0.125 if attr in attrs else getattr(configured, attr)[leg])


def test_a_keyed_entry_set_beside_an_old_field_wins():
    params = resolve_params(fusion_pb2.FusionConfig(bm25_weight=0.125, leg_weights={"bm25": 0.375},
                                                    graph_weight=0.5, rrf_leg_weights={"graph": 0.75}),
                            FusionSettings())
    assert params.leg_weights["bm25"] == 0.375
    assert params.rrf_leg_weights["graph"] == 0.75 and params.leg_weights["graph"] == 0.5


@pytest.mark.parametrize("method", list(FusionMethod))
def test_the_old_fields_are_written_for_old_readers(method):
    params = FusionParams(method=method, leg_weights={"bm25": 0.25, "vector": 0.75, "tag": 0.125, "graph": 0.375},
                          rrf_leg_weights={"bm25": 2.0, "vector": 1.5, "tag": 0.5, "graph": 0.625})
    config = params_to_proto(params)
    assert (config.bm25_weight, config.vector_weight, config.tag_weight) == (0.25, 0.75, 0.125)
    assert (config.rrf_bm25_weight, config.rrf_vector_weight, config.rrf_tag_weight) == (2.0, 1.5, 0.5)
    assert config.graph_weight == (0.625 if method is FusionMethod.RRF else 0.375)  # the weight that applied
    assert dict(config.leg_weights) == params.leg_weights and dict(config.rrf_leg_weights) == params.rrf_leg_weights


def test_a_request_names_only_legs_of_the_leg_table_and_the_service_any_well_formed_one():
    with pytest.raises(InvalidArgument, match="unknown leg 'bm52'"):
        resolve_params(fusion_pb2.FusionConfig(leg_weights={"bm52": 1.0}), FusionSettings())
    config = params_to_proto(params_from_settings(FusionSettings()))
    config.rrf_leg_weights["leg_99"] = 2.0  # a newer gateway's leg: the fusion service takes its weight
    assert params_from_proto(config).rrf_leg_weights["leg_99"] == pytest.approx(2.0)
    config.rrf_leg_weights["Not A Leg!"] = 1.0
    with pytest.raises(InvalidArgument, match="unknown leg"):
        params_from_proto(config)


# --- keyed weights equal the old named fields, for every method ---------------------------------------------

def old_leg_weight(named: dict[str, float], method: FusionMethod, leg: int) -> float:
    """FusionParams.leg_weights() before the keyed maps (the named fields), for the four legs it knew."""
    if method is FusionMethod.RRF:
        table = {BM25: named["rrf_bm25_weight"], VECTOR: named["rrf_vector_weight"], TAG: named["rrf_tag_weight"],
                 GRAPH: named["graph_weight"]}
    else:
        table = {BM25: named["bm25_weight"], VECTOR: named["vector_weight"], TAG: named["tag_weight"],
                 GRAPH: named["graph_weight"]}
    return table[leg]


def keyed(named: dict[str, float]) -> dict[str, dict[str, float]]:
    return {"leg_weights": {"bm25": named["bm25_weight"], "vector": named["vector_weight"],
                            "tag": named["tag_weight"], "graph": named["graph_weight"]},
            "rrf_leg_weights": {"bm25": named["rrf_bm25_weight"], "vector": named["rrf_vector_weight"],
                                "tag": named["rrf_tag_weight"], "graph": named["graph_weight"]}}


WEIGHT = st.sampled_from([0.0, 0.125, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0])  # exact in float32
NAMED = st.fixed_dictionaries({name: WEIGHT for name in legs.LEGACY})
LISTS = st.lists(st.tuples(st.sampled_from([BM25, VECTOR, TAG, GRAPH]), st.sampled_from(list(QueryKind)),
                           st.lists(st.tuples(st.sampled_from("ABCDEFGH"), st.floats(0, 10)), min_size=1, max_size=6)),
                 min_size=1, max_size=6)


def rankings(lists) -> list[Ranking]:
    return [Ranking(leg, [Item(d, f"{d}#0", s) for d, s in hits], kind) for leg, kind, hits in lists]


def fused(params: FusionParams, lists) -> list[tuple[str, float]]:
    return [(f.doc_id, f.score) for f in fuse(rankings(lists), params)]


@settings(max_examples=60, deadline=None)
@given(method=st.sampled_from(list(FusionMethod)), named=NAMED, lists=LISTS)
def test_keyed_weights_fuse_as_the_old_named_fields(method, named, lists):
    numbers = {"method": METHOD_ENUM[method], "rrf_k": 60.0, "variant_weight": 0.5, "hyde_weight": 0.75,
               "top_rank_bonus": 0.125}
    old = fusion_pb2.FusionConfig(**numbers, **named)
    new = fusion_pb2.FusionConfig(**numbers, **keyed(named))
    # The gateway's path (a request's override over the settings) and the fusion service's (a resolved config).
    for resolve in (lambda c: resolve_params(c, FusionSettings()), params_from_proto):
        by_name, by_key = resolve(old), resolve(new)
        assert by_name == by_key
        for leg in (BM25, VECTOR, TAG, GRAPH):
            assert by_key.leg_weight(leg) == old_leg_weight(named, method, leg)
        assert fused(by_name, lists) == fused(by_key, lists)
    # What an old fusion service reads from a new gateway's config: the same named fields.
    written = params_to_proto(params_from_proto(new))
    assert {name: getattr(written, name) for name in legs.LEGACY if name != "graph_weight"} == \
        {name: value for name, value in named.items() if name != "graph_weight"}
    assert written.graph_weight == named["graph_weight"]
