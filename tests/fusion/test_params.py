"""Fusion parameters: resolved once (unset means the configured default, 0 is a value, bad values are refused), then used as given."""

from __future__ import annotations

import pytest

from hybridsearch.common.config import FusionSettings
from hybridsearch.common.validation import InvalidArgument
from hybridsearch.fusion.params import params_from_proto, params_from_settings, params_to_proto, resolve_params
from hybridsearch.v1 import fusion_pb2


def test_unset_fields_keep_the_configured_defaults():
    defaults = FusionSettings()
    assert resolve_params(fusion_pb2.FusionConfig(), defaults) == params_from_settings(defaults)


@pytest.mark.parametrize("name", ["bm25_weight", "vector_weight", "variant_weight", "hyde_weight", "top_rank_bonus"])
def test_zero_is_a_value_not_the_default(name):
    params = resolve_params(fusion_pb2.FusionConfig(**{name: 0.0}), FusionSettings())
    assert getattr(params, name) == 0.0
    assert getattr(params_from_settings(FusionSettings()), name) != 0.0


@pytest.mark.parametrize("value", [-0.1, float("nan"), 1e7])
def test_bad_values_are_invalid(value):
    with pytest.raises(InvalidArgument, match="bm25_weight"):
        resolve_params(fusion_pb2.FusionConfig(bm25_weight=value), FusionSettings())


def test_what_was_applied_round_trips():
    params = resolve_params(fusion_pb2.FusionConfig(vector_weight=0.0, rrf_k=10), FusionSettings())
    again = resolve_params(params_to_proto(params), FusionSettings())
    assert again.method == params.method and again.vector_weight == 0.0
    # The wire carries float32: equal to that precision.
    numbers = [n for n, v in vars(params).items() if isinstance(v, float)]
    assert [getattr(again, n) for n in numbers] == pytest.approx([getattr(params, n) for n in numbers], rel=1e-6)


def test_the_service_uses_a_resolved_config_as_given():
    params = resolve_params(fusion_pb2.FusionConfig(rrf_k=7, tag_weight=0.0), FusionSettings())
    given = params_from_proto(params_to_proto(params))
    assert given.rrf_k == 7 and given.tag_weight == 0.0 and given.method == params.method
    assert given.bm25_weight == pytest.approx(FusionSettings().bm25_weight)


def test_the_service_refuses_an_unresolved_config():
    with pytest.raises(InvalidArgument, match="not resolved: method, rrf_k"):
        params_from_proto(fusion_pb2.FusionConfig())
    partial = params_to_proto(resolve_params(fusion_pb2.FusionConfig(), FusionSettings()))
    partial.ClearField("hyde_weight")
    with pytest.raises(InvalidArgument, match="hyde_weight unset"):
        params_from_proto(partial)
