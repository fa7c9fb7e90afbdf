"""FusionService: proto lists in, fused documents out (see fusion.methods for the maths)."""

from __future__ import annotations

import grpc

from hybridsearch.common.config import FusionSettings, get_settings
from hybridsearch.common.server import serve
from hybridsearch.common.validation import InvalidArgument, abort_invalid
from hybridsearch.fusion.methods import FusionMethod, FusionParams, Item, QueryKind, Ranking, fuse
from hybridsearch.v1 import common_pb2, fusion_pb2, fusion_pb2_grpc

# The legs fusion accepts (every common_pb2.Leg but UNSPECIFIED); lists and evidence carry the enum itself.
LEGS = frozenset(common_pb2.Leg.values()) - {common_pb2.LEG_UNSPECIFIED}
KINDS = {
    common_pb2.QUERY_KIND_UNSPECIFIED: QueryKind.ORIGINAL,
    common_pb2.QUERY_KIND_ORIGINAL: QueryKind.ORIGINAL,
    common_pb2.QUERY_KIND_LEXICAL_VARIANT: QueryKind.LEXICAL_VARIANT,
    common_pb2.QUERY_KIND_SEMANTIC_VARIANT: QueryKind.SEMANTIC_VARIANT,
    common_pb2.QUERY_KIND_HYDE: QueryKind.HYDE,
    common_pb2.QUERY_KIND_FEEDBACK: QueryKind.FEEDBACK,
}
KIND_ENUM = {
    QueryKind.ORIGINAL: common_pb2.QUERY_KIND_ORIGINAL,
    QueryKind.LEXICAL_VARIANT: common_pb2.QUERY_KIND_LEXICAL_VARIANT,
    QueryKind.SEMANTIC_VARIANT: common_pb2.QUERY_KIND_SEMANTIC_VARIANT,
    QueryKind.HYDE: common_pb2.QUERY_KIND_HYDE,
    QueryKind.FEEDBACK: common_pb2.QUERY_KIND_FEEDBACK,
}
METHODS = {
    common_pb2.FUSION_METHOD_RRF: FusionMethod.RRF,
    common_pb2.FUSION_METHOD_LINEAR: FusionMethod.LINEAR,
    common_pb2.FUSION_METHOD_DBSF: FusionMethod.DBSF,
    common_pb2.FUSION_METHOD_ZSCORE: FusionMethod.ZSCORE,
}
METHOD_ENUM = {v: k for k, v in METHODS.items()}
MAX_LISTS = 64
OVERRIDABLE = ("rrf_k", "bm25_weight", "vector_weight", "variant_weight", "hyde_weight", "top_rank_bonus",
               "rrf_bm25_weight", "rrf_vector_weight")


def params_from_settings(defaults: FusionSettings) -> FusionParams:
    """The configured fusion, field for field (settings and params share their names)."""
    return FusionParams(**{**defaults.model_dump(), "method": FusionMethod(defaults.method)})


def resolve_params(override: fusion_pb2.FusionConfig, defaults: FusionSettings) -> FusionParams:
    """Configured defaults, with every field the request's override sets applied (0 included)."""
    params = params_from_settings(defaults)
    if override.method:
        if override.method not in METHODS:
            raise InvalidArgument(f"unknown fusion method {override.method}")
        params.method = METHODS[override.method]
    for name in OVERRIDABLE:
        value = getattr(override, name)
        if value < 0 or value != value or value > 1e6:
            raise InvalidArgument(f"fusion.{name} must be a finite number >= 0, got {value}")
        if override.HasField(name):
            setattr(params, name, value)
    return params


def params_to_proto(params: FusionParams) -> fusion_pb2.FusionConfig:
    return fusion_pb2.FusionConfig(
        method=METHOD_ENUM[params.method], rrf_k=params.rrf_k, bm25_weight=params.bm25_weight,
        vector_weight=params.vector_weight, variant_weight=params.variant_weight,
        hyde_weight=params.hyde_weight, top_rank_bonus=params.top_rank_bonus,
        rrf_bm25_weight=params.rrf_bm25_weight, rrf_vector_weight=params.rrf_vector_weight,
    )


def fuse_proto(lists: list[common_pb2.RankedList], params: FusionParams, limit: int,
               with_text: bool = True) -> list[fusion_pb2.FusedHit]:
    texts: dict[str, tuple[str, str]] = {}
    rankings = []
    for rl in lists:
        if rl.leg not in LEGS:
            raise InvalidArgument(f"every list needs a leg ({', '.join(common_pb2.Leg.Name(v) for v in sorted(LEGS))})")
        if with_text:
            for h in rl.hits:
                texts.setdefault(h.chunk_id, (h.title, h.text))
        rankings.append(
            Ranking(
                leg=rl.leg, kind=KINDS.get(rl.kind, QueryKind.ORIGINAL),
                weight=rl.weight if rl.weight > 0 else None,
                items=[Item(h.doc_id, h.chunk_id, h.score) for h in sorted(rl.hits, key=lambda h: h.rank)],
            )
        )
    hits = []
    for f in fuse(rankings, params, limit):
        title, text = texts.get(f.chunk_id, ("", ""))
        hits.append(
            fusion_pb2.FusedHit(
                doc_id=f.doc_id, chunk_id=f.chunk_id, title=title, text=text,
                fusion_score=f.score, normalized_score=f.normalized,
                evidence=[
                    fusion_pb2.LegEvidence(leg=e.leg, kind=KIND_ENUM[e.kind], rank=e.rank, score=e.score)
                    for e in f.evidence
                ],
            )
        )
    return hits


class FusionServicer(fusion_pb2_grpc.FusionServiceServicer):
    def __init__(self, defaults: FusionSettings) -> None:
        self.defaults = defaults

    async def Fuse(self, request, context):
        try:
            if len(request.lists) > MAX_LISTS:
                raise InvalidArgument(f"at most {MAX_LISTS} lists, got {len(request.lists)}")
            if not 0 < request.limit <= 10_000:
                raise InvalidArgument(f"limit must be 1-10000, got {request.limit}")
            params = resolve_params(request.config, self.defaults)
            hits = fuse_proto(list(request.lists), params, request.limit, with_text=not request.omit_text)
        except InvalidArgument as err:
            await abort_invalid(context, err)
        return fusion_pb2.FuseResponse(hits=hits, config=params_to_proto(params))


async def main() -> None:
    settings = get_settings()

    async def register(server: grpc.aio.Server) -> list[str]:
        fusion_pb2_grpc.add_FusionServiceServicer_to_server(FusionServicer(settings.fusion), server)
        return [fusion_pb2.DESCRIPTOR.services_by_name["FusionService"].full_name]

    await serve("fusion", settings.endpoints.fusion_port, register)
