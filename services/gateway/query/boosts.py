"""A collection's metadata boosts and demotions (CollectionConfig.boosts), as Gnosis applies its type
boosts: once on the fused scores, before the rerank pool is cut, and once on the final scores after
rerank, capped at 1.0. A hit matches a boost when its metadata `field` equals `value`; several matching
boosts multiply. Pure functions: the gateway passes each hit's metadata (the legs bring back only the
fields the boosts name). A collection without boosts is left exactly as it was.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from operator import attrgetter

from hybridsearch.config.collections import MetadataBoost
from hybridsearch.gateway.query.calibration import capped
from hybridsearch.fusion.packed import FusedDoc
from hybridsearch.v1 import search_pb2

FUSION, RERANK = search_pb2.BOOST_STAGE_FUSION, search_pb2.BOOST_STAGE_RERANK
FACTOR = {FUSION: attrgetter("fusion"), RERANK: attrgetter("rerank")}  # a boost's factor at each stage
EXPLAINED = 100  # applied boosts reported for at most this many fused documents (explain's fusion_order)


def matching(metadata: Mapping[str, str], boosts: Sequence[MetadataBoost], stage: int) -> list[tuple[MetadataBoost, float]]:
    """The boosts a hit with this metadata gets at `stage`, with their factors (factor 1 left out)."""
    out = []
    for b in boosts:
        factor = FACTOR[stage](b)
        if factor != 1.0 and metadata.get(b.field) == b.value:
            out.append((b, factor))
    return out


def factors(metadata: Mapping[str, str], boosts: Sequence[MetadataBoost], stage: int) -> list[float]:
    """The factors a hit with this metadata gets at `stage`, in the boosts' order."""
    return [f for _, f in matching(metadata, boosts, stage)]


def _applied(collection: str, doc_id: str, found: list[tuple[MetadataBoost, float]],
             stage: int) -> list[search_pb2.AppliedBoost]:
    return [search_pb2.AppliedBoost(collection=collection, doc_id=doc_id, field=b.field, value=b.value, stage=stage,
                                    factor=f) for b, f in found]


def boost_fused(fused: list[FusedDoc], metadata_of: Callable[[str], Mapping[str, str]],
                boosts: Sequence[MetadataBoost], collection: str = "",
                ) -> tuple[list[FusedDoc], list[search_pb2.AppliedBoost]]:
    """One collection's fused hits with their fusion scores multiplied, re-sorted (stable) and re-normalised;
    what applied, each naming `collection`."""
    if not boosts or not fused:
        return fused, []
    applied: list[search_pb2.AppliedBoost] = []
    changed = False
    for f in fused:
        found = matching(metadata_of(f.chunk_id), boosts, FUSION)
        for _, factor in found:
            f.fusion_score *= factor
            changed = True
        applied += _applied(collection, f.doc_id, found, FUSION)
    if not changed:
        return fused, []
    ordered = sorted(fused, key=lambda f: -f.fusion_score)
    top = ordered[0].fusion_score
    for f in ordered:
        f.normalized_score = f.fusion_score / top if top > 0 else 0.0
    shown = {f.doc_id for f in ordered[:EXPLAINED]}
    return ordered, [a for a in applied if a.doc_id in shown]


@dataclass
class AnswerBoosts:
    """The boosts of an answer after rerank: its final order and what applied (explain), and what the calibrated
    scores take of them (gateway.query.calibration.calibrated): each boosted collection's hit's fusion-stage
    product, each reranked one's rerank-stage factors, by fused index."""

    order: list[int]
    applied: list[search_pb2.AppliedBoost] = field(default_factory=list)
    fusion: dict[int, float] = field(default_factory=dict)
    rerank: dict[int, list[float]] = field(default_factory=dict)


def answer_boosts(finals: dict[int, float], order: list[int], reranked: Mapping[int, float],
                  boosts_of: Callable[[int], tuple[str, Sequence[MetadataBoost]]],
                  metadata_of: Callable[[int], Mapping[str, str]], doc_of: Callable[[int], str]) -> AnswerBoosts:
    """After rerank: each reranked hit's final score multiplied by its collection's (`boosts_of`: the collection
    and its boosts) rerank-stage boosts, capped at 1.0 (`finals` updated in place); the order re-sorted by final
    score (stable) when any applied; what applied, each naming its collection."""
    out = AnswerBoosts(order)
    for i in order:
        collection, boosts = boosts_of(i)
        if not boosts:
            continue
        metadata = metadata_of(i)
        out.fusion[i] = math.prod(factors(metadata, boosts, FUSION))
        if i in reranked:
            found = matching(metadata, boosts, RERANK)
            out.rerank[i] = [f for _, f in found]
            out.applied += _applied(collection, doc_of(i), found, RERANK)
    for i, stage_factors in out.rerank.items():
        finals[i] = capped(finals[i], stage_factors)
    if out.applied:
        out.order = sorted(order, key=lambda i: -finals[i])
    return out
