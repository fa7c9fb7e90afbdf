"""FusionService: proto lists in, fused documents out (see fusion.methods for the maths)."""

from __future__ import annotations

import grpc

from hybridsearch.query import legs
from hybridsearch.config.settings import get_settings
from hybridsearch.runtime.server import serve
from hybridsearch.contract.errors import InvalidArgument, abort_invalid
from hybridsearch.fusion.methods import Fused, FusionParams, Item, QueryKind, Ranking, fuse
from hybridsearch.fusion.packed import KIND_ENUM, KINDS, pack_fused
from hybridsearch.fusion.params import params_from_proto, params_to_proto
from hybridsearch.v1 import common_pb2, fusion_pb2, fusion_pb2_grpc

MAX_LISTS = 64


def fuse_proto(lists: list[common_pb2.RankedList], params: FusionParams, limit: int,
               with_text: bool = True) -> list[fusion_pb2.FusedHit]:
    rankings, texts = rankings_of(lists, with_text)
    return fused_hits(fuse(rankings, params, limit), texts)


def fuse_lists(lists: list[common_pb2.RankedList], params: FusionParams, limit: int) -> list[Fused]:
    """The lists fused by the library (no texts: what a packed answer carries)."""
    return fuse(rankings_of(lists, with_text=False)[0], params, limit)


def fused_hits(fused: list[Fused], texts: dict[str, tuple[str, str]]) -> list[fusion_pb2.FusedHit]:
    """The library's answer as FusedHit messages, each with its chunk's (title, text) from `texts`."""
    hits = []
    for f in fused:
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


def rankings_of(lists: list[common_pb2.RankedList],
                with_text: bool = True) -> tuple[list[Ranking], dict[str, tuple[str, str]]]:
    """The lists as the fusion library takes them, and each chunk's (title, text) when asked."""
    texts: dict[str, tuple[str, str]] = {}
    rankings = []
    for rl in lists:
        # A list carries its leg's common_pb2.Leg value. Any value but UNSPECIFIED is a leg: proto3 enums are
        # open, and a leg the leg table (query.legs) has no row for fuses with the default weight.
        if rl.leg <= common_pb2.LEG_UNSPECIFIED:
            raise InvalidArgument("every list needs a leg: a Leg value above 0 ("
                                  + ", ".join(f"{s.value} {s.name}" for s in legs.SPECS) + ", or a leg of its own)")
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
    return rankings, texts


class FusionServicer(fusion_pb2_grpc.FusionServiceServicer):
    """Fuses with the configuration the request carries, resolved by the gateway (validated, not re-resolved)."""

    async def Fuse(self, request: fusion_pb2.FuseRequest, context) -> fusion_pb2.FuseResponse:
        try:
            if len(request.lists) > MAX_LISTS:
                raise InvalidArgument(f"at most {MAX_LISTS} lists, got {len(request.lists)}")
            if not 0 < request.limit <= 10_000:
                raise InvalidArgument(f"limit must be 1-10000, got {request.limit}")
            params = params_from_proto(request.config)
            if request.packed:  # columns, no texts: fusion.packed
                packed = pack_fused(fuse_lists(list(request.lists), params, request.limit))
                return fusion_pb2.FuseResponse(packed=packed, config=params_to_proto(params))
            hits = fuse_proto(list(request.lists), params, request.limit, with_text=not request.omit_text)
        except InvalidArgument as err:
            await abort_invalid(context, err)
        return fusion_pb2.FuseResponse(hits=hits, config=params_to_proto(params))


async def main() -> None:
    settings = get_settings()

    async def register(server: grpc.aio.Server) -> list[str]:
        fusion_pb2_grpc.add_FusionServiceServicer_to_server(FusionServicer(), server)
        return [fusion_pb2.DESCRIPTOR.services_by_name["FusionService"].full_name]

    await serve("fusion", settings.endpoints.fusion_port, register)
