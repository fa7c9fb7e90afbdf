"""Fusion parameters on the wire: resolved once, in the gateway (settings + the request's override), and
carried complete to the fusion service, which validates them and uses them as given."""

from __future__ import annotations

from hybridsearch.common.config import FusionSettings
from hybridsearch.common.validation import InvalidArgument
from hybridsearch.fusion.methods import FusionMethod, FusionParams
from hybridsearch.v1 import common_pb2, fusion_pb2

METHODS = {
    common_pb2.FUSION_METHOD_RRF: FusionMethod.RRF,
    common_pb2.FUSION_METHOD_LINEAR: FusionMethod.LINEAR,
    common_pb2.FUSION_METHOD_DBSF: FusionMethod.DBSF,
    common_pb2.FUSION_METHOD_ZSCORE: FusionMethod.ZSCORE,
}
METHOD_ENUM = {v: k for k, v in METHODS.items()}
# The numbers a FusionConfig carries (FusionParams, FusionSettings and FusionConfig share these names).
NUMBERS = ("rrf_k", "bm25_weight", "vector_weight", "tag_weight", "variant_weight", "hyde_weight", "top_rank_bonus",
           "rrf_bm25_weight", "rrf_vector_weight", "rrf_tag_weight", "graph_weight")


def params_from_settings(defaults: FusionSettings) -> FusionParams:
    """The configured fusion, field for field (settings and params share their names)."""
    return FusionParams(**{**defaults.model_dump(), "method": FusionMethod(defaults.method)})


def _checked(config: fusion_pb2.FusionConfig) -> fusion_pb2.FusionConfig:
    if config.method and config.method not in METHODS:
        raise InvalidArgument(f"unknown fusion method {config.method}")
    for name in NUMBERS:
        value = getattr(config, name)
        if value < 0 or value != value or value > 1e6:
            raise InvalidArgument(f"fusion.{name} must be a finite number >= 0, got {value}")
    return config


def resolve_params(override: fusion_pb2.FusionConfig, defaults: FusionSettings) -> FusionParams:
    """Configured defaults, with every field the request's override sets applied (0 included): the one
    place fusion parameters are resolved (the gateway's plan)."""
    params = params_from_settings(defaults)
    _checked(override)
    if override.method:
        params.method = METHODS[override.method]
    for name in NUMBERS:
        if override.HasField(name):
            setattr(params, name, getattr(override, name))
    return params


def params_from_proto(config: fusion_pb2.FusionConfig) -> FusionParams:
    """A resolved configuration as the gateway sends it, used as given: every field must be set."""
    _checked(config)
    missing = [name for name in NUMBERS if not config.HasField(name)]
    if not config.method:
        missing.insert(0, "method")
    if missing:
        raise InvalidArgument(f"fusion config is not resolved: {', '.join(missing)} unset "
                              "(send every field; the gateway resolves its request's override and settings)")
    return FusionParams(method=METHODS[config.method], **{name: getattr(config, name) for name in NUMBERS})


def params_to_proto(params: FusionParams) -> fusion_pb2.FusionConfig:
    """Every field set: what the gateway sends and what explain shows as applied."""
    return fusion_pb2.FusionConfig(method=METHOD_ENUM[params.method], **{name: getattr(params, name) for name in NUMBERS})
