"""The answer: the collections' boosts on the final scores (gateway.query.boosts), calibrated scores
(gateway.query.calibration), the page with its previews and tag counts (gateway.query.previews), the counts line
and, on request, the explanation (gateway.query.explain) and each hit's neighbouring chunks
(gateway.query.context). Only the page is built: snippets and evidence for hits nobody will see would cost most
of an answer. Later pages read the order as kept here (`Answer.order`, built by paging.Pager after the answer
has gone)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from hybridsearch.bm25.analyzer import EnglishAnalyzer
from hybridsearch.config.search import RerankSettings
from hybridsearch.config.stores import Bm25Settings
from hybridsearch.fusion.packed import FusedDoc, pack_docs
from hybridsearch.gateway.query.boosts import AnswerBoosts, answer_boosts
from hybridsearch.gateway.query.calibration import Scale, capped, non_increasing, own_scores, scale_of
from hybridsearch.contract.errors import Refusal
from hybridsearch.gateway.query.context import attach_context
from hybridsearch.gateway.query.deadline import Deadline
from hybridsearch.gateway.query.explain import explanation
from hybridsearch.gateway.query.keys import placed
from hybridsearch.gateway.query.pool import Pool
from hybridsearch.gateway.query.previews import result_counts, search_hit, show_page
from hybridsearch.gateway.query.report import Report
from hybridsearch.gateway.query.request import SearchPlan
from hybridsearch.gateway.query.rerank import Reranked
from hybridsearch.gateway.query.texts import StoredTexts
from hybridsearch.reranker.blend import fusion_weight
from hybridsearch.v1 import paging_pb2, search_pb2


@dataclass
class Answer:
    response: search_pb2.SearchResponse
    order: Callable[[int], paging_pb2.KeptOrder]  # the first n hits in final order, for later pages
    candidates: int


class Responder:
    def __init__(self, rerank: RerankSettings, bm25: Bm25Settings, texts: StoredTexts) -> None:
        self.cfg, self.texts = rerank, texts
        # Highlights match the query's terms as BM25 analyses them (stemmed, without stopwords).
        self.analyzer = EnglishAnalyzer(bm25.stemmer, bm25.stopwords)

    async def respond(self, plan: SearchPlan, fused: list[FusedDoc], reranked: Reranked, pool: Pool,
                      deadline: Deadline, report: Report) -> Answer:
        finals = reranked.final_scores(fused)
        # what every step below asks of a hit, worked out once: its collection's plan, and (several collections)
        # its collection and chunk id from its merged key
        place = placed(plan, fused)
        parts = plan.plans
        # each collection's boosts on its own hits
        boosts = answer_boosts(finals, reranked.order, reranked.rerank,
                               lambda i: (place(i)[0], parts[place(i)[0]].config.boosts),
                               lambda i: pool.hit(fused[i].chunk_id).metadata, lambda i: fused[i].doc_id)
        report.boosts += boosts.applied
        scores = self.calibrated(plan, fused, reranked, boosts, pool, place, parts)
        kept = [i for i in boosts.order if scores[i] >= plan.min_score]
        sealed = {c for c, part in parts.items() if part.seal}  # once, not once per kept hit

        def kept_title(i: int) -> str:  # none of a sealed collection: a later page opens its stored chunks
            if sealed and place(i)[0] in sealed:
                return ""
            return pool.hit(fused[i].chunk_id).title

        def order(n: int) -> paging_pb2.KeptOrder:  # later pages' order: the fused hits as columns
            head = kept[:n]
            return paging_pb2.KeptOrder(
                fused=pack_docs(fused[i] for i in head), titles=[kept_title(i) for i in head],
                scores=[scores[i] for i in head], blended_scores=[finals[i] for i in head],
                rerank_scores=[reranked.rerank.get(i, 0.0) for i in head], reranked=[i in reranked.rerank for i in head])

        shown = kept[plan.offset : plan.offset + plan.top_k]
        sources = await self.texts.fill(plan, [fused[i] for i in shown], pool, deadline, report)
        page = [search_hit(fused[i], *place(i), source.title, scores[i], finals[i], reranked.rerank.get(i, 0.0),
                           i in reranked.rerank) for i, source in zip(shown, sources)]
        tags = show_page(page, sources, plan.query, self.analyzer, plan.offset, plan.effort, plan.shows)
        counts = result_counts(len(reranked.rerank), len(fused), len(page), plan.min_score, len(kept))
        response = search_pb2.SearchResponse(
            hits=page, legs=list(report.legs.values()), degraded=report.degraded, mode=plan.mode, effort=plan.effort,
            total_candidates=len(kept), notices=report.notices, tag_counts=tags, offset=plan.offset, counts=counts,
            took_ms=(time.perf_counter() - report.started) * 1000,
        )
        if plan.explain:
            response.explain.CopyFrom(explanation(plan, place, fused, reranked, pool, report))
        if plan.context and page:  # each hit's neighbours, from the stores its chunk lives in (none: noted)
            shown_hits = list(response.hits)  # the answer's own messages (the page's were copied into it)
            try:
                chunks = await self.texts.chunks([(h.collection, h.doc_id, h.chunk_id) for h in shown_hits], deadline,
                                                 plan.stored_of)
            except Refusal as err:
                response.notices.append(f"context of {len(page)} hits not shown: {err}")
            else:
                attach_context(shown_hits, chunks, plan.context)
        return Answer(response, order, len(kept))

    def calibrated(self, plan: SearchPlan, fused: list[FusedDoc], reranked: Reranked,
                   boosts: AnswerBoosts, pool: Pool, place: Callable[[int], tuple[str, str]],
                   parts: dict[str, SearchPlan]) -> dict[int, float]:
        """Each hit's calibrated score (gateway.query.calibration), measured on its own collection's scale with its
        collection's boosts, shown non-increasing down the final order (which stays as it is). The candidates
        are measured together (calibration.own_scores), not one call chain per hit."""
        order = boosts.order
        # A reranked answer's hit outside the pool: the reranked scale, no verification (gateway.query.calibration).
        probabilities = weights = None
        if reranked.rerank:
            bands, tail = tuple(self.cfg.bands), self.cfg.tail_fusion_weight
            probabilities = [reranked.rerank.get(i, 0.0) for i in order]
            weights = [fusion_weight(i + 1, bands, tail) for i in order]
        collections = [place(i)[0] for i in order]
        scales: dict[str, Scale] = {}  # each collection's scale, made once
        for collection in dict.fromkeys(collections):
            scales[collection] = scale_of(pool.lists_of(collection), parts.get(collection, plan).fusion)
        fusion_boosts = [boosts.fusion.get(i, 1.0) for i in order] if boosts.fusion else None
        own = own_scores([fused[i].evidence for i in order], [scales[c] for c in collections], fusion_boosts,
                         probabilities, weights)
        for n, i in enumerate(order):
            if i in boosts.rerank:
                own[n] = capped(own[n], boosts.rerank[i])
        return dict(zip(order, non_increasing(own)))
