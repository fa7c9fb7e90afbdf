"""The answer's calibrated scores (gateway.query.respond.Responder.calibrated): the candidates measured together give
each hit the score the per-hit measure (calibration.own_score) gives it, over one collection or several, with
boosts at both stages, reranked or not."""

import math
import random
from dataclasses import replace

import pytest

from hybridsearch.config.settings import Settings
from hybridsearch.fusion.service import fuse_proto
from hybridsearch.gateway.query.boosts import FUSION, RERANK, answer_boosts, factors
from hybridsearch.gateway.query.calibration import capped, non_increasing, own_score, scale_of
from hybridsearch.gateway.query.keys import key, placed, split_key
from hybridsearch.gateway.query.fanout import MergedPool
from hybridsearch.gateway.query.pool import Pool
from hybridsearch.gateway.query.request import plan_search
from hybridsearch.gateway.query.rerank import Reranked
from hybridsearch.gateway.query.respond import Responder
from hybridsearch.security.sealing import Sealer
from hybridsearch.gateway.query.texts import StoredTexts
from hybridsearch.reranker.blend import fusion_weight
from hybridsearch.v1 import common_pb2, search_pb2
from query_standins import backends

SETTINGS = Settings(collections={
    "boosted": {"boosts": [{"field": "type", "value": "decision", "fusion": 1.3, "rerank": 1.25},
                           {"field": "type", "value": "draft", "fusion": 0.6, "rerank": 0.7}]},
    "plain": {}})
TYPES = ("decision", "draft", "note")


def lists(rng: random.Random, prefix: str) -> list[common_pb2.RankedList]:
    """A BM25 and a vector list (and a lexical variant's) over overlapping documents with random metadata."""
    out = []
    for leg, kind, start in ((common_pb2.LEG_BM25, common_pb2.QUERY_KIND_ORIGINAL, 0),
                             (common_pb2.LEG_VECTOR, common_pb2.QUERY_KIND_ORIGINAL, 30),
                             (common_pb2.LEG_BM25, common_pb2.QUERY_KIND_LEXICAL_VARIANT, 10)):
        docs = [f"{prefix}{d}" for d in range(start, start + rng.randint(20, 80))]
        scores = sorted((rng.random() for _ in docs), reverse=True)
        out.append(common_pb2.RankedList(leg=leg, kind=kind, hits=[
            common_pb2.LegHit(doc_id=d, chunk_id=f"{d}#0", title=d, score=s, rank=r,
                              metadata={"type": TYPES[int(d[1:]) % 3]})
            for r, (d, s) in enumerate(zip(docs, scores), start=1)]))
    return out


def per_hit(responder, plan, fused, reranked, order, pool):
    """The calibrated scores as measured one hit at a time (the loop Responder.calibrated ran before)."""
    bands, tail = tuple(responder.cfg.bands), responder.cfg.tail_fusion_weight
    own = []
    for i in order:
        hit = fused[i]
        collection = split_key(hit.chunk_id, plan.collection)[0] if plan.parts else plan.collection
        part = plan.plan_of(collection)
        scale, boosts = scale_of(pool.lists_of(collection), part.fusion), part.config.boosts
        metadata = pool.hit(hit.chunk_id).metadata if boosts else {}
        probability = reranked.rerank.get(i, 0.0 if reranked.rerank else None)
        weight = fusion_weight(i + 1, bands, tail) if probability is not None else 0.0
        boost = math.prod(factors(metadata, boosts, FUSION)) if boosts else 1.0
        score = own_score(hit.evidence, scale, probability, weight, boost)
        own.append(capped(score, factors(metadata, boosts, RERANK)) if boosts and i in reranked.rerank else score)
    return dict(zip(order, non_increasing(own)))


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("collections", [["boosted"], ["plain"], ["boosted", "plain"]])
@pytest.mark.parametrize("rerank_depth", [0, 20])
def test_calibrated_gives_each_hit_its_per_hit_score(seed, collections, rerank_depth):
    rng = random.Random(seed)
    request = search_pb2.SearchRequest(query="q", collections=collections) if len(collections) > 1 else \
        search_pb2.SearchRequest(query="q", collection=collections[0])
    plan = plan_search(request, SETTINGS)
    pools = {c: Pool() for c in collections}
    fused = []
    for c in collections:
        pools[c].add(lists(rng, c[0]))
        hits = fuse_proto(pools[c].lists, plan.plan_of(c).fusion, 1000, with_text=False)
        for h in hits:
            if len(collections) > 1:
                h.chunk_id = key(c, h.chunk_id)
        fused.extend(hits)
    pool = MergedPool(pools, plan.collection) if len(collections) > 1 else pools[collections[0]]
    order = list(range(len(fused)))
    rng.shuffle(order)
    rerank = {i: rng.random() for i in order[:rerank_depth]}
    reranked = Reranked(order=order, rerank=rerank)
    responder = Responder(SETTINGS.rerank, SETTINGS.bm25, StoredTexts(SETTINGS.query, SETTINGS.rerank, Sealer(SETTINGS), backends()))
    place = placed(plan, fused)
    parts = {c: plan.plan_of(c) for c, _ in plan.configs}
    boosts = answer_boosts({i: 0.5 for i in order}, order, reranked.rerank,
                           lambda i: (place(i)[0], parts[place(i)[0]].config.boosts),
                           lambda i: pool.hit(fused[i].chunk_id).metadata, lambda i: fused[i].doc_id)
    got = responder.calibrated(plan, fused, reranked, replace(boosts, order=order), pool, place, parts)
    assert list(got) == order
    assert got == per_hit(responder, plan, fused, reranked, order, pool)
