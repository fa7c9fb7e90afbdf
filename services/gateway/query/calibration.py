"""Calibrated scores: one scale for every query, so `min_score` means the same thing for all of them.

`SearchHit.score` used to be the position-aware blend of the fused score normalised to the query's best
hit, so every query's top hit scored about 1.0 whatever its relevance. The calibrated score measures each
hit against fixed references instead (Gnosis' design, "Smart Skip" and "Score Interpretation"):

* **Evidence share** `x` in [0, 1]: the hit's weighted reciprocal-rank evidence, sum of w / (k + rank) over
  the lists that found it, over the *theoretical maximum* of the lists that ran: a document ranked first
  in every one of them (an empty list counts: a perfect match would have been in it). Weights are the
  ones fusion applied (the list's kind weight times the method's leg weight, fusion.methods). Under RRF
  this is the fused score over its closed-form maximum, the top-rank bonus included when the original
  lists of every leg that earns it (the leg table, query.legs: BM25 and vector) ran. The score-based methods (min-max, z-score, DBSF) normalise every list to its
  own query, so their fused score has no query-independent maximum (z-score's top grows with the list's
  length; min-max and DBSF give every list's top 1 whatever its relevance): their hits are measured by the
  same rank evidence, under the method's leg weights. Fusion-stage metadata boosts multiply `x` (at most 1).
* **Cosine modulation**: rank evidence is relative (every query has a first hit), the vector leg's cosine
  is not: `m = x * cosine` for a hit the original vector list returned. A hit it did not return, when that
  list ran, is no more similar than the list's last hit, so that lowest cosine stands in for its own.
  Without a vector list (BM25 mode, the vector leg down) `m = x` (Gnosis' topic-only results).
* **Belief** `b = sigmoid(STEEPNESS * (m - CENTRE))`, centred at 0.4 and rescaled so that m = 0 gives 0
  and m = 1 gives 1.
* **Not reranked**: `SYNTHETIC_LOW + (SYNTHETIC_CAP - SYNTHETIC_LOW) * b`, in [0.40, 0.70]: at most 0.70
  says that no cross-encoder verified it ("probably relevant", not "confirmed"). A hit without any
  evidence scores NO_EVIDENCE, below that band.
* **Reranked**: the blend that ordered it (reranker.blend), with its per-query part replaced by the
  absolute one: `w * b + (1 - w) * p`, where `w` is the blend's fusion weight at the hit's fused position
  and `p` the cross-encoder's probability after the keyword floor. Both parts are absolute, so the score is
  comparable across queries, and it follows the blended order more closely than `p` alone would.
  (The cross-encoder's probability alone, Gnosis' choice, ranked SciFact's pooled hits worse with the
  shipped model: docs/quality.md "Calibrated scores".)
* **Not read in a reranked answer**: a hit below the rerank pool is on the reranked scale too, with
  `p = 0`, so at most `w` (0.40 below rank 10 by default): the reranker was there and did not read it,
  so it has no verification credit, and the "probably relevant" band belongs to answers that no reranker
  read (Gnosis' skip), not to the tail of one that a reranker did.
* **Display** (`non_increasing`): the order is the ranking's and never changes here; a hit shows the lower
  of its own score and the score shown above it, so scores never rise down the list and `min_score` cuts
  a prefix in which every hit's own score passes.

Pure functions over the fusion protos' values; no I/O. `own_score` measures one hit; `own_scores` measures
an answer's candidates in one pass (the evidence summed per hit, the rest over all of them at once with numpy),
to the same floats.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import accumulate

import numpy as np

from hybridsearch.query import legs
from hybridsearch.fusion.methods import FusionMethod, FusionParams
from hybridsearch.fusion.packed import KINDS
from hybridsearch.fusion.packed import LegEvidence
from hybridsearch.v1 import common_pb2

SYNTHETIC_LOW, SYNTHETIC_CAP = 0.40, 0.70  # the not-reranked band (Gnosis)
CENTRE = 0.40      # the sigmoid's midpoint in modulated evidence (Gnosis)
STEEPNESS = 10.0   # the sigmoid's slope: over m in [0, 1] it spans 98% of its range before rescaling
NO_EVIDENCE = 0.0  # a hit that no list found
ORIGINAL = common_pb2.QUERY_KIND_ORIGINAL
VECTOR = common_pb2.LEG_VECTOR

ListKey = tuple[int, int]  # (leg, query kind) of a ranked list or of a hit's evidence


@dataclass(frozen=True)
class Scale:
    """What one collection's hits are measured against: the lists that ran, as fusion weighted them."""

    weights: dict[ListKey, float]    # each list's weight in fusion (kind weight x the method's leg weight)
    k: float                         # RRF's k (every method's rank evidence uses it)
    maximum: float                   # the evidence of a document first in every list that ran
    bonus: float                     # RRF's top-rank bonus (0 under other methods)
    window: int                      # the bonus's top ranks
    cosine_bound: float | None       # the original vector list's lowest cosine; None: no such list ran
    bonus_legs: frozenset[int]       # the legs whose original lists earn the bonus together


def list_weight(ranked: common_pb2.RankedList, params: FusionParams) -> float:
    """A list's weight as fusion.methods.fuse applies it (the list's own weight, else its kind's)."""
    kind_weight = ranked.weight if ranked.weight > 0 else params.kind_weight(KINDS[ranked.kind])
    return kind_weight * params.leg_weight(ranked.leg)


def scale_of(lists: Iterable[common_pb2.RankedList], params: FusionParams) -> Scale:
    """The scale of a collection's search: its ranked lists (hits or none) and the fusion it ran."""
    lists = list(lists)
    weights: dict[ListKey, float] = {}
    for rl in lists:
        weights.setdefault((rl.leg, rl.kind), list_weight(rl, params))
    maximum = sum(list_weight(rl, params) / (params.rrf_k + 1) for rl in lists)
    ran = {rl.leg for rl in lists if rl.kind == ORIGINAL}
    bonus = params.top_rank_bonus if params.method is FusionMethod.RRF and legs.bonus_values() else 0.0
    if bonus and legs.bonus_values() <= ran:
        maximum += bonus
    cosines = [h.score for rl in lists if (rl.leg, rl.kind) == (common_pb2.LEG_VECTOR, ORIGINAL) for h in rl.hits]
    return Scale(weights, params.rrf_k, maximum, bonus, params.top_rank_window, min(cosines, default=None),
                 frozenset(legs.bonus_values()))


def _rank_evidence(evidence: Sequence[LegEvidence], scale: Scale) -> tuple[float, float | None]:
    """The hit's weighted rank evidence (the top-rank bonus included) and its own cosine (the original vector
    list's score; None when that list did not return it), in one pass over the evidence."""
    weights, k, window = scale.weights, scale.k, scale.window
    total, own = 0.0, None
    top = set() if scale.bonus else None  # the legs that ranked it in their top window: only for the bonus
    for j in range(len(evidence)):  # by index: for a hit's one to four items, cheaper than an iterator
        e = evidence[j]
        leg, kind, rank = e.leg, e.kind, e.rank
        total += weights.get((leg, kind), 0.0) / (k + rank)
        if kind == ORIGINAL:
            if top is not None and rank <= window:
                top.add(leg)
            if leg == VECTOR:
                score = e.score
                if own is None or score > own:
                    own = score
    if top is not None and scale.bonus_legs <= top:
        total += scale.bonus
    return total, own


def _share_and_cosine(evidence: Sequence[LegEvidence], scale: Scale, boost: float) -> tuple[float, float | None]:
    """evidence_share and hit_cosine in one pass over the evidence."""
    total, own = _rank_evidence(evidence, scale)
    share = min(1.0, boost * total / scale.maximum) if scale.maximum > 0 else 0.0
    cosine = own if own is not None else scale.cosine_bound
    return share, None if cosine is None else min(1.0, max(0.0, cosine))


def evidence_share(evidence: Sequence[LegEvidence], scale: Scale, boost: float = 1.0) -> float:
    """x in [0, 1]: the hit's rank evidence over the scale's maximum, times its fusion-stage boosts."""
    return _share_and_cosine(evidence, scale, boost)[0]


def hit_cosine(evidence: Sequence[LegEvidence], scale: Scale) -> float | None:
    """The hit's cosine to the query in [0, 1]: the original vector list's score, else that list's lowest
    (a hit it did not return is no closer), None when no original vector list ran."""
    return _share_and_cosine(evidence, scale, 1.0)[1]


def _sigmoid(m: float) -> float:
    return 1.0 / (1.0 + math.exp(-STEEPNESS * (m - CENTRE)))


_LOW, _HIGH = _sigmoid(0.0), _sigmoid(1.0)


def belief(share: float, cosine: float | None) -> float:
    """b in [0, 1]: the sigmoid of the cosine-modulated evidence, rescaled so m = 0 and m = 1 are its ends."""
    m = share if cosine is None else share * cosine
    return (_sigmoid(m) - _LOW) / (_HIGH - _LOW)


def synthetic(b: float) -> float:
    """A not-reranked hit's score, in [SYNTHETIC_LOW, SYNTHETIC_CAP]."""
    return min(SYNTHETIC_CAP, SYNTHETIC_LOW + (SYNTHETIC_CAP - SYNTHETIC_LOW) * b)


def reranked_score(b: float, probability: float, fusion_weight: float) -> float:
    """A reranked hit's score: the position blend of its belief and the cross-encoder's probability."""
    return fusion_weight * b + (1.0 - fusion_weight) * probability


def own_score(evidence: Sequence[LegEvidence], scale: Scale, probability: float | None = None,
              fusion_weight: float = 0.0, boost: float = 1.0) -> float:
    """A hit's calibrated score before display: on the reranked scale when `probability` is given (0 for a
    hit the reranker did not read in a reranked answer), else synthetic."""
    if not evidence:
        return NO_EVIDENCE if probability is None else reranked_score(0.0, probability, fusion_weight)
    b = belief(*_share_and_cosine(evidence, scale, boost))
    return synthetic(b) if probability is None else reranked_score(b, probability, fusion_weight)


def own_scores(evidences: Sequence[Sequence[LegEvidence]], scales: Sequence[Scale],
               boosts: Sequence[float] | None = None, probabilities: Sequence[float] | None = None,
               fusion_weights: Sequence[float] | None = None) -> list[float]:
    """`own_score` of many hits (an answer's candidates), each with its own scale, fusion-stage boost (None:
    1.0 for all), probability and fusion weight (None for all: not reranked). The evidence is summed hit by
    hit; the share, cosine, belief and score are computed over all hits at once, in own_score's operations and
    order, so the floats are its own."""
    totals, maxima, cosines = [], [], []
    for evidence, scale in zip(evidences, scales, strict=True):
        total, own = _rank_evidence(evidence, scale)
        cosine = own if own is not None else scale.cosine_bound
        totals.append(total)
        maxima.append(scale.maximum)
        cosines.append(math.nan if cosine is None else cosine)
    found = np.array([len(e) > 0 for e in evidences], dtype=bool)
    maximum = np.array(maxima, dtype=np.float64)
    boosted = np.array(totals, dtype=np.float64) * (1.0 if boosts is None else np.asarray(boosts, dtype=np.float64))
    share = np.minimum(1.0, np.divide(boosted, maximum, out=np.zeros_like(maximum), where=maximum > 0))
    cosine = np.array(cosines, dtype=np.float64)
    no_cosine = np.isnan(cosine)
    m = np.where(no_cosine, share, share * np.minimum(1.0, np.maximum(0.0, np.where(no_cosine, 0.0, cosine))))
    # math.exp, not np.exp: numpy's own (SIMD) exp may differ from libm's in the last bit on some CPUs.
    exp = np.array([math.exp(x) for x in (-STEEPNESS * (m - CENTRE)).tolist()], dtype=np.float64)
    b = np.where(found, (1.0 / (1.0 + exp) - _LOW) / (_HIGH - _LOW), 0.0)
    if probabilities is None:
        scores = np.where(found, np.minimum(SYNTHETIC_CAP, SYNTHETIC_LOW + (SYNTHETIC_CAP - SYNTHETIC_LOW) * b),
                          NO_EVIDENCE)
    else:
        weight = np.asarray(fusion_weights, dtype=np.float64)
        scores = weight * b + (1.0 - weight) * np.asarray(probabilities, dtype=np.float64)
    return scores.tolist()


def capped(score: float, stage_factors: Sequence[float]) -> float:
    """A final score after the rerank stage's boost factors, each product capped at 1.0."""
    for factor in stage_factors:
        score = min(1.0, score * factor)
    return score


def non_increasing(scores: Iterable[float]) -> list[float]:
    """The scores as shown down a fixed order: each the lower of its own and the one shown above it."""
    return list(accumulate(scores, min))
