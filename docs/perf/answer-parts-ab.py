"""Issue 24's calibration of an answer, old and new alternated in one process (CPU µs per answer, medians of
--rounds, each --reps answers), on the in-process harness's candidates (docs/perf/gateway-inprocess.py: BM25
and vector lists of 100 hits, 50 in common: 150 fused candidates): Responder.calibrated
(calibration.own_scores, the candidates together) against the loop it replaced (own_score hit by hit, kept
here as it was), not reranked and reranked (the first 20).

    PYTHONPATH=.shim .venv/bin/python docs/perf/answer-parts-ab.py [--rounds 15] [--reps 200]
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
import statistics
import time

from hybridsearch.config.settings import Settings
from hybridsearch.fusion.service import fuse_proto
from hybridsearch.gateway.query.boosts import FUSION, RERANK, factors
from hybridsearch.gateway.query.calibration import (
    NO_EVIDENCE, ORIGINAL, VECTOR, belief, capped, non_increasing, reranked_score, scale_of, synthetic,
)
from hybridsearch.gateway.query.keys import split_key
from hybridsearch.gateway.query.pool import Pool
from hybridsearch.gateway.query.request import plan_search
from hybridsearch.gateway.query.rerank import Reranked
from hybridsearch.gateway.query.respond import Responder
from hybridsearch.reranker.blend import fusion_weight
from hybridsearch.v1 import common_pb2, search_pb2

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))



def share_and_cosine_before(evidence, scale, boost):
    """calibration._share_and_cosine before issue 24 (the evidence iterated, the top legs always tracked)."""
    weights, k, window = scale.weights, scale.k, scale.window
    total, top, own = 0.0, set(), None
    for e in evidence:
        leg, kind, rank = e.leg, e.kind, e.rank
        total += weights.get((leg, kind), 0.0) / (k + rank)
        if kind == ORIGINAL:
            if rank <= window:
                top.add(leg)
            if leg == VECTOR and (own is None or e.score > own):
                own = e.score
    if scale.bonus and scale.bonus_legs <= top:
        total += scale.bonus
    share = min(1.0, boost * total / scale.maximum) if scale.maximum > 0 else 0.0
    cosine = own if own is not None else scale.cosine_bound
    return share, None if cosine is None else min(1.0, max(0.0, cosine))


def own_score_before(evidence, scale, probability=None, fusion_weight=0.0, boost=1.0):
    """calibration.own_score before issue 24."""
    if not evidence:
        return NO_EVIDENCE if probability is None else reranked_score(0.0, probability, fusion_weight)
    b = belief(*share_and_cosine_before(evidence, scale, boost))
    return synthetic(b) if probability is None else reranked_score(b, probability, fusion_weight)


def per_hit_calibrated(responder, plan, fused, reranked, order, pool):
    """Responder.calibrated before issue 24: own_score called hit by hit."""
    measures = {}
    bands, tail = tuple(responder.cfg.bands), responder.cfg.tail_fusion_weight
    own = []
    for i in order:
        hit = fused[i]
        collection = split_key(hit.chunk_id, plan.collection)[0] if plan.parts else plan.collection
        if collection not in measures:
            part = plan.plan_of(collection)
            measures[collection] = part, scale_of(pool.lists_of(collection), part.fusion)
        part, scale = measures[collection]
        boosts = part.config.boosts
        metadata = pool.hit(hit.chunk_id).metadata if boosts else {}
        probability = reranked.rerank.get(i, 0.0 if reranked.rerank else None)
        weight = fusion_weight(i + 1, bands, tail) if probability is not None else 0.0
        boost = math.prod(factors(metadata, boosts, FUSION)) if boosts else 1.0
        score = own_score_before(hit.evidence, scale, probability, weight, boost)
        own.append(capped(score, factors(metadata, boosts, RERANK)) if boosts and i in reranked.rerank else score)
    return dict(zip(order, non_increasing(own)))


def candidates():
    settings = Settings()
    plan = plan_search(search_pb2.SearchRequest(query="fusion of ranked lists", effort=common_pb2.EFFORT_FAST), settings)
    pool = Pool()
    pool.add(common_pb2.RankedList(leg=leg, kind=common_pb2.QUERY_KIND_ORIGINAL, hits=[
        common_pb2.LegHit(doc_id=f"d{d}", chunk_id=f"d{d}#0", title=f"d{d}", score=top - r / 100, rank=r + 1)
        for r, d in enumerate(range(start, start + 100))])
        for leg, start, top in ((common_pb2.LEG_BM25, 0, 10.0), (common_pb2.LEG_VECTOR, 50, 0.9)))
    fused = fuse_proto(pool.lists, plan.fusion, 1000, with_text=False)
    return settings, plan, pool, fused



def cpu_us(fn, reps: int) -> float:
    t = time.process_time()
    for _ in range(reps):
        fn()
    return (time.process_time() - t) / reps * 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--reps", type=int, default=200)
    args = parser.parse_args()
    settings, plan, pool, fused = candidates()
    responder = Responder(settings, None)
    order = list(range(len(fused)))
    for name, reranked in (("not reranked", Reranked(order=order)),
                           ("reranked", Reranked(order=order, rerank={i: 1 - i / 20 for i in range(20)}))):
        assert responder.calibrated(plan, fused, reranked, order, pool) == \
            per_hit_calibrated(responder, plan, fused, reranked, order, pool)
        old, new = [], []
        for _ in range(args.rounds):
            old.append(cpu_us(lambda r=reranked: per_hit_calibrated(responder, plan, fused, r, order, pool), args.reps))
            new.append(cpu_us(lambda r=reranked: responder.calibrated(plan, fused, r, order, pool), args.reps))
        o, n = statistics.median(old), statistics.median(new)
        print(f"calibration, {len(fused)} candidates, {name}: old {o:.0f} µs, new {n:.0f} µs, new/old {n / o:.2f}")


if __name__ == "__main__":
    main()
