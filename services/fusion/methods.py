"""Rank fusion, usable on its own (no gRPC): weighted RRF, min-max or z-score linear combination, DBSF.

Input: ranked lists of (doc_id, chunk_id, score), each tagged with the leg (its proto `Leg` value) and the
query kind (original, variant, HyDE, feedback) that produced it. Chunks are first collapsed to the
best chunk per document in every list, so a long document does not vote several times.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import Enum
from typing import NamedTuple

from hybridsearch.query import legs


class FusionMethod(str, Enum):
    RRF = "rrf"
    LINEAR = "linear"
    ZSCORE = "zscore"
    DBSF = "dbsf"


class QueryKind(str, Enum):
    ORIGINAL = "original"
    LEXICAL_VARIANT = "lexical"
    SEMANTIC_VARIANT = "semantic"
    HYDE = "hyde"
    FEEDBACK = "feedback"


class Item(NamedTuple):  # a tuple: made ~100 times a list, every answer (a frozen dataclass is 3x dearer)
    doc_id: str
    chunk_id: str = ""
    score: float = 0.0


@dataclass
class Ranking:
    leg: int  # common_pb2.Leg
    items: list[Item]
    kind: QueryKind = QueryKind.ORIGINAL
    weight: float | None = None  # None: the configured weight of `kind`


@dataclass
class FusionParams:
    """How to fuse. The library's defaults: weighted RRF (GNO's, CodeRAG's), the leg table's weights (the
    service's method is FusionSettings', z-score)."""

    method: FusionMethod = FusionMethod.RRF
    rrf_k: float = 60.0
    variant_weight: float = 0.5
    hyde_weight: float = 0.7
    feedback_weight: float = 0.5
    top_rank_bonus: float = 0.1
    top_rank_window: int = 5
    # Each leg's weight, keyed by its name (query.legs: "bm25", "vector", "tag", "graph"): under the
    # score-based methods (linear, z-score, DBSF), and under RRF, where it multiplies the list's kind
    # weight. A registered leg a mapping leaves out gets its row's default; a leg no row names
    # (`leg_<n>`) weighs legs.DEFAULT_WEIGHT / DEFAULT_RRF_WEIGHT unless named here.
    leg_weights: dict[str, float] = field(default_factory=legs.default_weights)
    rrf_leg_weights: dict[str, float] = field(default_factory=legs.default_rrf_weights)

    def __post_init__(self) -> None:
        self.leg_weights = {**legs.default_weights(), **self.leg_weights}
        self.rrf_leg_weights = {**legs.default_rrf_weights(), **self.rrf_leg_weights}

    def kind_weight(self, kind: QueryKind) -> float:
        return {
            QueryKind.ORIGINAL: 1.0,
            QueryKind.LEXICAL_VARIANT: self.variant_weight,
            QueryKind.SEMANTIC_VARIANT: self.variant_weight,
            QueryKind.HYDE: self.hyde_weight,
            QueryKind.FEEDBACK: self.feedback_weight,
        }[kind]

    def weights(self) -> dict[str, float]:
        """The leg weights this method applies, by leg name."""
        return self.rrf_leg_weights if self.method is FusionMethod.RRF else self.leg_weights

    def leg_weight(self, leg: int) -> float:
        """The weight of a leg's lists under this method, by its common_pb2.Leg value (any value: see legs)."""
        name = legs.name_of(leg)
        return self.weights().get(name, legs.default_weight(name, rrf=self.method is FusionMethod.RRF))


@dataclass(slots=True)
class Evidence:
    leg: int
    kind: QueryKind
    rank: int  # 1-based, among documents of that list
    score: float


@dataclass(slots=True)
class Fused:
    doc_id: str
    chunk_id: str
    score: float
    normalized: float = 0.0
    evidence: list[Evidence] = field(default_factory=list)


def best_chunk_per_document(items: list[Item]) -> list[Item]:
    """Keeps each document's first (best) chunk; order is preserved."""
    seen: set[str] = set()
    out = []
    for it in items:
        if it.doc_id not in seen:
            seen.add(it.doc_id)
            out.append(it)
    return out


def _minmax(scores: list[float]) -> list[float]:
    lo, hi = min(scores), max(scores)
    if hi - lo < 1e-12:
        return [1.0] * len(scores)
    return [(s - lo) / (hi - lo) for s in scores]


def _mean_std(scores: list[float]) -> tuple[float, float]:
    mean = sum(scores) / len(scores)
    return mean, math.sqrt(sum((s - mean) ** 2 for s in scores) / len(scores))


def _zscore(scores: list[float]) -> list[float]:
    """Standard scores, shifted so the list's lowest is 0 (a missing document contributes nothing)."""
    mean, std = _mean_std(scores)
    if std < 1e-12:
        return [1.0] * len(scores)
    z = [(s - mean) / std for s in scores]
    low = min(z)
    return [v - low for v in z]


def _dbsf(scores: list[float]) -> list[float]:
    """Distribution-based score fusion: scale by mean +- 3 standard deviations, clip to [0, 1]."""
    mean, std = _mean_std(scores)
    if std < 1e-12:
        return [1.0] * len(scores)
    lo, hi = mean - 3 * std, mean + 3 * std
    return [min(1.0, max(0.0, (s - lo) / (hi - lo))) for s in scores]


NORMALIZERS = {FusionMethod.LINEAR: _minmax, FusionMethod.ZSCORE: _zscore, FusionMethod.DBSF: _dbsf}


def fuse(rankings: list[Ranking], params: FusionParams | None = None, limit: int | None = None) -> list[Fused]:
    """Fuses rankings into one list of documents, best first, normalized scores in [0, 1]."""
    params = params or FusionParams()
    fused: dict[str, Fused] = {}
    best_contribution: dict[str, float] = {}
    # The legs whose original lists earn RRF's top-rank bonus when all of them put a document in their head.
    top_original: dict[int, set[str]] = {leg: set() for leg in legs.bonus_values()}

    best_rank: dict[str, int] = {}  # each document's best rank in any list: the first tie-break
    for ranking in rankings:
        items = best_chunk_per_document(ranking.items)
        if not items:
            continue
        leg, kind = ranking.leg, ranking.kind
        weight = ranking.weight if ranking.weight is not None else params.kind_weight(kind)
        weight *= params.leg_weight(leg)
        if params.method is FusionMethod.RRF:
            contributions = [weight / (params.rrf_k + r) for r in range(1, len(items) + 1)]
        else:
            norm = NORMALIZERS[params.method]
            contributions = [weight * s for s in norm([it.score for it in items])]
        if kind is QueryKind.ORIGINAL and leg in top_original:
            top_original[leg].update(it.doc_id for it in items[: params.top_rank_window])
        for rank, (it, contribution) in enumerate(zip(items, contributions), start=1):
            doc_id = it.doc_id
            entry = fused.get(doc_id)
            if entry is None:  # its score the sum from 0.0, as a later list's contribution adds to it
                fused[doc_id] = Fused(doc_id, it.chunk_id, 0.0 + contribution, 0.0, [Evidence(leg, kind, rank, it.score)])
                best_rank[doc_id] = rank
                if contribution > -1.0:
                    best_contribution[doc_id] = contribution
                continue
            entry.score += contribution
            entry.evidence.append(Evidence(leg, kind, rank, it.score))
            if rank < best_rank[doc_id]:
                best_rank[doc_id] = rank
            if contribution > best_contribution.get(doc_id, -1.0):
                best_contribution[doc_id] = contribution
                entry.chunk_id = it.chunk_id

    if params.method is FusionMethod.RRF and params.top_rank_bonus and top_original:
        for doc_id in set.intersection(*top_original.values()):
            fused[doc_id].score += params.top_rank_bonus

    ordered = sorted(fused.values(), key=lambda f: (-f.score, best_rank[f.doc_id], f.doc_id))
    if limit is not None:
        ordered = ordered[:limit]
    top = ordered[0].score if ordered else 0.0
    for f in ordered:
        f.normalized = f.score / top if top > 0 else 0.0
    return ordered
