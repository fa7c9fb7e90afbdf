"""Calibrated scores (gateway.query.calibration): the scale, its range, its monotonicity, reranked or not, display."""

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hybridsearch.fusion.methods import FusionMethod, FusionParams, Item, QueryKind, Ranking, fuse
from hybridsearch.gateway.query.calibration import (
    NO_EVIDENCE, SYNTHETIC_CAP, SYNTHETIC_LOW, belief, evidence_share, hit_cosine, non_increasing, own_score,
    own_scores, scale_of,
)
from hybridsearch.v1 import common_pb2, fusion_pb2

BM25, VECTOR, TAG = common_pb2.LEG_BM25, common_pb2.LEG_VECTOR, common_pb2.LEG_TAG
ORIGINAL, LEXICAL = common_pb2.QUERY_KIND_ORIGINAL, common_pb2.QUERY_KIND_LEXICAL_VARIANT
RRF = FusionParams(method=FusionMethod.RRF)
ZSCORE = FusionParams(method=FusionMethod.ZSCORE, leg_weights={"bm25": 0.5, "vector": 0.5})


def ranked(leg, *cosines_or_scores, kind=ORIGINAL, weight=1.0, prefix="d"):
    return common_pb2.RankedList(leg=leg, kind=kind, weight=weight, hits=[
        common_pb2.LegHit(doc_id=f"{prefix}{r}", chunk_id=f"{prefix}{r}#0", score=s, rank=r)
        for r, s in enumerate(cosines_or_scores, start=1)])


def ev(leg, rank, score=0.0, kind=ORIGINAL):
    return fusion_pb2.LegEvidence(leg=leg, kind=kind, rank=rank, score=score)


HYBRID = [ranked(BM25, 12.0, 9.0, 5.0), ranked(VECTOR, 0.7, 0.6, 0.3)]


def test_rrf_share_is_the_fused_score_over_its_closed_form_maximum():
    """Under RRF the share is exactly fusion.methods' fused score over a document first in every list
    (2 / (k + 1) plus the top-rank bonus)."""
    scale = scale_of(HYBRID, RRF)
    assert scale.maximum == pytest.approx(2 / 61 + 0.1)
    rankings = [Ranking(rl.leg, [Item(h.doc_id, h.chunk_id, h.score) for h in rl.hits], QueryKind.ORIGINAL)
                for rl in HYBRID]
    for f in fuse(rankings, RRF):
        evidence = [fusion_pb2.LegEvidence(leg=e.leg, kind=ORIGINAL, rank=e.rank, score=e.score) for e in f.evidence]
        assert evidence_share(evidence, scale) == pytest.approx(f.score / scale.maximum)
    assert evidence_share([ev(BM25, 1), ev(VECTOR, 1)], scale) == pytest.approx(1.0)


def test_score_based_methods_use_rank_evidence_under_their_leg_weights_and_no_bonus():
    lists = [ranked(BM25, 3.0), ranked(VECTOR, 0.5), ranked(TAG, 2.0)]
    scale = scale_of(lists, FusionParams(method=FusionMethod.ZSCORE,
                                         leg_weights={"bm25": 0.2, "vector": 0.6, "tag": 0.2}))
    assert scale.bonus == 0 and scale.maximum == pytest.approx(1.0 / 61)
    assert evidence_share([ev(VECTOR, 1)], scale) == pytest.approx(0.6)
    assert evidence_share([ev(BM25, 1), ev(VECTOR, 1), ev(TAG, 1)], scale) == pytest.approx(1.0)


def test_every_list_that_ran_counts_empty_or_not_and_variants_with_their_weight():
    """A query the BM25 leg found nothing for keeps BM25 in its maximum: a vector-only hit is half-evidenced."""
    empty_bm25 = [ranked(BM25), ranked(VECTOR, 0.2)]
    assert evidence_share([ev(VECTOR, 1)], scale_of(empty_bm25, ZSCORE)) == pytest.approx(0.5)
    with_variant = HYBRID + [ranked(BM25, 4.0, kind=LEXICAL, weight=0.5)]
    scale = scale_of(with_variant, ZSCORE)
    assert evidence_share([ev(BM25, 1), ev(VECTOR, 1)], scale) == pytest.approx(2 / 2.5)
    assert evidence_share([ev(BM25, 1), ev(VECTOR, 1), ev(BM25, 1, kind=LEXICAL)], scale) == pytest.approx(1.0)


@pytest.mark.parametrize("params", [RRF, ZSCORE], ids=["rrf", "zscore"])
def test_the_share_falls_with_rank_and_boosts_raise_it_up_to_one(params):
    scale = scale_of(HYBRID, params)
    shares = [evidence_share([ev(BM25, r), ev(VECTOR, r)], scale) for r in (1, 2, 5, 20, 100)]
    assert shares == sorted(shares, reverse=True) and len(set(shares)) == len(shares)
    one = evidence_share([ev(VECTOR, 3)], scale)
    assert evidence_share([ev(VECTOR, 3)], scale, boost=1.3) == pytest.approx(min(1.0, 1.3 * one))
    assert evidence_share([ev(BM25, 1), ev(VECTOR, 1)], scale, boost=1.3) == 1.0


def test_the_cosine_is_the_vector_lists_own_else_its_lowest_else_none():
    scale = scale_of(HYBRID, ZSCORE)
    assert hit_cosine([ev(VECTOR, 1, 0.7), ev(BM25, 1, 12.0)], scale) == pytest.approx(0.7)
    assert hit_cosine([ev(BM25, 1, 12.0)], scale) == pytest.approx(0.3)  # not returned: at most the last
    assert hit_cosine([ev(VECTOR, 1, 0.9, kind=common_pb2.QUERY_KIND_FEEDBACK)], scale) == pytest.approx(0.3)
    assert hit_cosine([ev(BM25, 1, 12.0)], scale_of([ranked(BM25, 12.0)], ZSCORE)) is None
    assert hit_cosine([ev(VECTOR, 1, -0.2)], scale) == 0.0


@pytest.mark.parametrize("rank", [1, 2, 10, 50])
@pytest.mark.parametrize("cosine", [0.0, 0.1, 0.4, 0.7, 1.0])
@pytest.mark.parametrize("params", [RRF, ZSCORE], ids=["rrf", "zscore"])
def test_not_reranked_scores_lie_in_the_band_and_never_pass_the_cap(rank, cosine, params):
    lists = [ranked(BM25, 5.0), ranked(VECTOR, cosine)]
    for evidence in ([ev(BM25, rank), ev(VECTOR, rank, cosine)], [ev(VECTOR, rank, cosine)], [ev(BM25, rank)]):
        for boost in (1.0, 1.3, 10.0):
            score = own_score(evidence, scale_of(lists, params), boost=boost)
            assert SYNTHETIC_LOW <= score <= SYNTHETIC_CAP


def test_the_band_is_reached_at_its_ends_and_no_evidence_scores_below_it():
    scale = scale_of([ranked(BM25, 5.0), ranked(VECTOR, 1.0)], ZSCORE)
    assert own_score([ev(BM25, 1), ev(VECTOR, 1, 1.0)], scale) == pytest.approx(SYNTHETIC_CAP)
    assert own_score([ev(BM25, 1), ev(VECTOR, 1, 0.0)], scale) == pytest.approx(SYNTHETIC_LOW)
    assert own_score([], scale) == NO_EVIDENCE < SYNTHETIC_LOW
    assert belief(0.4, None) == pytest.approx(belief(0.8, 0.5))  # centred on the modulated evidence


def test_scores_rise_with_evidence_and_with_the_cosine():
    scale = scale_of([ranked(BM25, 5.0, 4.0), ranked(VECTOR, 0.8, 0.2)], ZSCORE)
    by_cosine = [own_score([ev(BM25, 1), ev(VECTOR, 1, c)], scale) for c in (0.2, 0.4, 0.6, 0.8)]
    by_rank = [own_score([ev(BM25, r), ev(VECTOR, r, 0.6)], scale) for r in (1, 3, 10, 40)]
    assert by_cosine == sorted(by_cosine) and len(set(by_cosine)) == 4
    assert by_rank == sorted(by_rank, reverse=True) and len(set(by_rank)) == 4


def test_the_same_evidence_scores_the_same_whatever_the_rest_of_the_query():
    """What makes scores comparable: a hit is measured against the lists' maximum, not the query's best."""
    hit = [ev(BM25, 2), ev(VECTOR, 3, 0.55)]
    alone = own_score(hit, scale_of([ranked(BM25, 9.0, 8.0), ranked(VECTOR, 0.6, 0.58, 0.55)], ZSCORE))
    crowded = own_score(hit, scale_of([ranked(BM25, 30.0, 8.0, *[1.0] * 40), ranked(VECTOR, 0.9, 0.7, 0.55)], ZSCORE))
    assert alone == pytest.approx(crowded)


def test_a_nonsense_querys_top_hit_scores_below_a_strong_querys():
    strong = scale_of([ranked(BM25, 14.0, 6.0), ranked(VECTOR, 0.72, 0.41)], ZSCORE)
    nonsense = scale_of([ranked(BM25), ranked(VECTOR, 0.08, 0.07)], ZSCORE)  # no term matched; far vectors
    top_strong = own_score([ev(BM25, 1), ev(VECTOR, 1, 0.72)], strong)
    top_nonsense = own_score([ev(VECTOR, 1, 0.08)], nonsense)
    assert top_nonsense < 0.45 < 0.6 < top_strong


@pytest.mark.parametrize("weight", [0.75, 0.6, 0.4])
def test_reranked_scores_follow_the_probability_and_may_pass_the_cap(weight):
    scale = scale_of(HYBRID, ZSCORE)
    evidence = [ev(BM25, 1), ev(VECTOR, 1, 0.7)]
    scores = [own_score(evidence, scale, p, weight) for p in (0.0, 0.3, 0.6, 0.9, 1.0)]
    assert scores == sorted(scores) and len(set(scores)) == 5
    assert all(0.0 <= s <= 1.0 for s in scores)
    b = belief(1.0, 0.7)
    assert scores[-1] == pytest.approx(weight * b + (1 - weight)) and scores[-1] > SYNTHETIC_CAP
    assert own_score([ev(VECTOR, 1, 0.05)], scale, 0.01, weight) < SYNTHETIC_LOW  # refuted: below the band


@given(st.lists(st.floats(0.0, 1.0), max_size=50))
def test_display_never_rises_and_never_shows_more_than_a_hits_own(scores):
    shown = non_increasing(scores)
    assert len(shown) == len(scores)
    assert all(a >= b for a, b in zip(shown, shown[1:]))
    assert all(s <= own for s, own in zip(shown, scores))
    assert shown[:1] == scores[:1]


def test_display_keeps_an_already_ordered_list_as_it_is():
    assert non_increasing([0.9, 0.7, 0.7, 0.2]) == [0.9, 0.7, 0.7, 0.2]
    assert non_increasing([0.9, 0.3, 0.6, 0.1]) == [0.9, 0.3, 0.3, 0.1]


@pytest.mark.parametrize("cosine", [0.3, 0.7, 1.0])
def test_a_hit_the_reranker_did_not_read_in_a_reranked_answer_gets_no_band(cosine):
    """Below the rerank pool (tail weight 0.40, p = 0): the fusion part alone, under the band's floor."""
    scale = scale_of([ranked(BM25, 5.0), ranked(VECTOR, cosine)], ZSCORE)
    evidence = [ev(BM25, 1), ev(VECTOR, 1, cosine)]
    unread = own_score(evidence, scale, 0.0, 0.4)
    assert unread == pytest.approx(0.4 * belief(1.0, cosine)) and unread <= SYNTHETIC_LOW
    assert unread < own_score(evidence, scale) and unread < own_score(evidence, scale, 0.5, 0.4)


LEGS = (BM25, VECTOR, TAG)
KINDS = (ORIGINAL, LEXICAL, common_pb2.QUERY_KIND_SEMANTIC_VARIANT, common_pb2.QUERY_KIND_FEEDBACK)
PARAMS = (RRF, ZSCORE, FusionParams(method=FusionMethod.RRF, top_rank_bonus=0.0),
          FusionParams(method=FusionMethod.DBSF, leg_weights={"bm25": 0.3, "vector": 0.7}))


def random_scale(rng: random.Random):
    """The scale of some of HYBRID's lists, others, empty ones, under one of PARAMS (or one that ran nothing)."""
    lists = [ranked(leg, *sorted((rng.uniform(-0.3, 1.2) for _ in range(rng.randint(0, 6))), reverse=True),
                    kind=rng.choice(KINDS), weight=rng.choice((0.0, 0.5, 1.0)))
             for leg in LEGS for _ in range(rng.randint(0, 2))]
    return scale_of(lists, rng.choice(PARAMS))


def random_evidence(rng: random.Random) -> list[fusion_pb2.LegEvidence]:
    return [ev(rng.choice(LEGS), rng.randint(1, 120), rng.uniform(-0.3, 1.2), kind=rng.choice(KINDS))
            for _ in range(rng.choice((0, 0, 1, 2, 3, 4, 6)))]


@pytest.mark.parametrize("seed", range(40))
def test_own_scores_are_own_score_of_each_hit_to_the_float(seed):
    """own_scores (an answer's candidates at once) gives each hit exactly own_score's float, reranked or not,
    boosted or not, over several collections' scales, hits without evidence and scales without maxima included."""
    rng = random.Random(seed)
    scales = [random_scale(rng) for _ in range(3)]
    n = rng.randint(0, 220)
    evidences = [random_evidence(rng) for _ in range(n)]
    hit_scales = [rng.choice(scales) for _ in range(n)]
    boosts = [rng.choice((1.0, 1.0, 1.3, 0.5, 2.0)) for _ in range(n)]
    probabilities = [rng.choice((0.0, rng.random())) for _ in range(n)]
    weights = [rng.choice((0.75, 0.6, 0.4)) for _ in range(n)]
    synthetic = own_scores(evidences, hit_scales)
    assert synthetic == [own_score(e, s) for e, s in zip(evidences, hit_scales)]
    boosted = own_scores(evidences, hit_scales, boosts)
    assert boosted == [own_score(e, s, boost=b) for e, s, b in zip(evidences, hit_scales, boosts)]
    reranked = own_scores(evidences, hit_scales, boosts, probabilities, weights)
    assert reranked == [own_score(e, s, p, w, b)
                        for e, s, b, p, w in zip(evidences, hit_scales, boosts, probabilities, weights)]
    assert all(type(x) is float for x in synthetic + boosted + reranked)


@given(st.lists(st.tuples(st.lists(st.tuples(st.sampled_from(LEGS), st.integers(1, 300),
                                             st.floats(-1.0, 2.0, allow_nan=False), st.sampled_from(KINDS)),
                                   max_size=5),
                          st.floats(0.1, 3.0), st.floats(0.0, 1.0), st.sampled_from((0.75, 0.6, 0.4))),
                max_size=40),
       st.sampled_from(PARAMS), st.booleans())
def test_own_scores_match_own_score_for_any_evidence(hits, params, rerank):
    scale = scale_of(HYBRID, params)
    evidences = [[ev(leg, rank, score, kind=kind) for leg, rank, score, kind in e] for e, *_ in hits]
    boosts = [b for _, b, _, _ in hits]
    probabilities = [p for *_, p, _ in hits] if rerank else None
    weights = [w for *_, w in hits] if rerank else None
    expected = [own_score(e, scale, None if probabilities is None else probabilities[n],
                          0.0 if weights is None else weights[n], boosts[n]) for n, e in enumerate(evidences)]
    assert own_scores(evidences, [scale] * len(hits), boosts, probabilities, weights) == expected
