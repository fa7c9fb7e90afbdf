"""Fusion parameters on the wire: resolved once, in the gateway (settings + the request's override), and
carried complete to the fusion service, which validates them and uses them as given.

Leg weights travel keyed by leg name (FusionConfig.leg_weights / rrf_leg_weights, query.legs). The old
named weights (bm25_weight, rrf_tag_weight, graph_weight, ...: legs.LEGACY) are still read, each onto its
leg's entry, a keyed entry set beside one winning, and still written, for clients and services that
predate the maps."""

from __future__ import annotations

from hybridsearch.query import legs
from hybridsearch.config.search import FusionSettings
from hybridsearch.contract.errors import InvalidArgument
from hybridsearch.fusion.methods import FusionMethod, FusionParams
from hybridsearch.v1 import common_pb2, fusion_pb2

METHODS = {
    common_pb2.FUSION_METHOD_RRF: FusionMethod.RRF,
    common_pb2.FUSION_METHOD_LINEAR: FusionMethod.LINEAR,
    common_pb2.FUSION_METHOD_DBSF: FusionMethod.DBSF,
    common_pb2.FUSION_METHOD_ZSCORE: FusionMethod.ZSCORE,
}
METHOD_ENUM = {v: k for k, v in METHODS.items()}
# The numbers a FusionConfig carries besides the leg weights (FusionParams, FusionSettings and FusionConfig
# share these names, and legs.MAPS for the weights).
NUMBERS = ("rrf_k", "variant_weight", "hyde_weight", "top_rank_bonus")
MAX_LEG_WEIGHTS = 64  # entries per map: far more legs than any search runs


def params_from_settings(defaults: FusionSettings) -> FusionParams:
    """The configured fusion, field for field (settings and params share their names)."""
    return FusionParams(**{**defaults.model_dump(), "method": FusionMethod(defaults.method)})


def _number(what: str, value: float) -> None:
    if value < 0 or value != value or value > 1e6:
        raise InvalidArgument(f"{what} must be a finite number >= 0, got {value}")


def _checked(config: fusion_pb2.FusionConfig, registered: bool = False) -> fusion_pb2.FusionConfig:
    """Refuses a bad method, number or leg weight; with `registered`, a leg name the leg table lacks too
    (a request to the gateway: a misspelt leg would weigh nothing). The fusion service takes any well-formed
    name, so that a gateway with a leg it does not know yet is still served (the leg weighs its default)."""
    if config.method and config.method not in METHODS:
        raise InvalidArgument(f"unknown fusion method {config.method}")
    for name in (*NUMBERS, *legs.LEGACY):
        _number(f"fusion.{name}", getattr(config, name))
    known = legs.names()
    for attr in legs.MAPS:
        entries = getattr(config, attr)
        if len(entries) > MAX_LEG_WEIGHTS:
            raise InvalidArgument(f"fusion.{attr}: at most {MAX_LEG_WEIGHTS} legs, got {len(entries)}")
        for leg, value in entries.items():
            if not legs.NAME.fullmatch(leg) or (registered and leg not in known):
                raise InvalidArgument(f"fusion.{attr}: unknown leg {leg[:40]!r} (legs: {', '.join(known)})")
            _number(f"fusion.{attr}[{leg!r}]", value)
    return config


def leg_entries(config: fusion_pb2.FusionConfig) -> dict[str, dict[str, float]]:
    """The leg weights a config sets, per map: its old named fields, then its keyed entries over them."""
    given = {name: getattr(config, name) for name in legs.LEGACY if config.HasField(name)}
    entries = legs.legacy_entries(given)
    for attr in legs.MAPS:
        entries[attr].update(getattr(config, attr))
    return entries


def resolve_params(override: fusion_pb2.FusionConfig, defaults: FusionSettings) -> FusionParams:
    """Configured defaults, with every field the request's override sets applied (0 included): the one
    place fusion parameters are resolved (the gateway's plan)."""
    params = params_from_settings(defaults)
    _checked(override, registered=True)
    if override.method:
        params.method = METHODS[override.method]
    for name in NUMBERS:
        if override.HasField(name):
            setattr(params, name, getattr(override, name))
    for attr, entries in leg_entries(override).items():
        getattr(params, attr).update(entries)
    return params


def params_from_proto(config: fusion_pb2.FusionConfig) -> FusionParams:
    """A resolved configuration as the gateway sends it, used as given: every number must be set. Leg
    weights need not all be: a leg the maps leave out weighs its default (legs.default_weight)."""
    _checked(config)
    missing = [name for name in NUMBERS if not config.HasField(name)]
    if not config.method:
        missing.insert(0, "method")
    if missing:
        raise InvalidArgument(f"fusion config is not resolved: {', '.join(missing)} unset "
                              "(send every field; the gateway resolves its request's override and settings)")
    return FusionParams(method=METHODS[config.method], **{name: getattr(config, name) for name in NUMBERS},
                        **leg_entries(config))


def params_to_proto(params: FusionParams) -> fusion_pb2.FusionConfig:
    """Every field set: what the gateway sends and what explain shows as applied. The old named weights
    too, for readers that predate the maps (graph_weight: the weight under the applied method)."""
    config = fusion_pb2.FusionConfig(method=METHOD_ENUM[params.method], **{name: getattr(params, name) for name in NUMBERS},
                                     leg_weights=params.leg_weights, rrf_leg_weights=params.rrf_leg_weights)
    rrf = params.method is FusionMethod.RRF
    for name, (leg, attrs) in legs.LEGACY.items():
        attr = attrs[0] if len(attrs) == 1 else legs.RRF_WEIGHTS if rrf else legs.WEIGHTS
        setattr(config, name, getattr(params, attr).get(leg, legs.default_weight(leg, attr == legs.RRF_WEIGHTS)))
    return config
