"""The answer: the collections' boosts on the final scores, calibrated scores (gateway.query.calibration), the
page with its previews and tag counts, the counts line and, on request, the explanation. Only the page
is built: snippets and evidence for hits nobody will see would cost most of an answer. Later pages read
the order as kept here (`Answer.order`, built by paging.Pager after the answer has gone)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from hybridsearch.bm25.analyzer import EnglishAnalyzer
from hybridsearch.config.search import RerankSettings
from hybridsearch.config.stores import Bm25Settings
from hybridsearch.fusion.params import params_to_proto
from hybridsearch.gateway.query.boosts import FUSION, RERANK, boost_final, capped, factors
from hybridsearch.gateway.query.calibration import Scale, non_increasing, own_scores, scale_of
from hybridsearch.gateway.query.deadline import Deadline
from hybridsearch.gateway.query.keys import split_key
from hybridsearch.gateway.query.pool import Pool
from hybridsearch.gateway.query.previews import result_counts, show, tag_distribution
from hybridsearch.gateway.query.report import Report
from hybridsearch.gateway.query.request import SearchPlan
from hybridsearch.gateway.query.rerank import Reranked
from hybridsearch.gateway.query.texts import StoredTexts
from hybridsearch.reranker.blend import fusion_weight
from hybridsearch.contract.validation import Refusal
from hybridsearch.v1 import common_pb2, expansion_pb2, fusion_pb2, paging_pb2, search_pb2

EXPLAINED_ORDER = 100  # fused hits an explanation lists


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

    async def respond(self, plan: SearchPlan, fused: list[fusion_pb2.FusedHit], reranked: Reranked, pool: Pool,
                      deadline: Deadline, report: Report) -> Answer:
        finals = reranked.final_scores(fused)
        order = reranked.order
        # what every step below asks of a hit, worked out once: its collection's plan, and (several collections)
        # its collection and chunk id from its merged key
        parts = {c: plan.plan_of(c) for c, _ in plan.configs}
        place = placed(plan, fused)

        for collection, config in plan.configs:  # each collection's boosts on its own hits
            def metadata(i: int, collection=collection):
                mine = not plan.parts or place(i)[0] == collection
                return pool.hit(fused[i].chunk_id).metadata if mine else {}
            order, applied = boost_final(finals, order, reranked.rerank, metadata, lambda i: fused[i].doc_id,
                                         config.boosts, collection)
            report.boosts += applied
        scores = self.calibrated(plan, fused, reranked, order, pool, place, parts)
        kept = [i for i in order if scores[i] >= plan.min_score]

        def hit(i: int) -> search_pb2.SearchHit:
            return search_hit(fused[i], *place(i), pool.hit(fused[i].chunk_id).title, scores[i], finals[i],
                              reranked.rerank.get(i, 0.0), i in reranked.rerank)

        sealed = {c for c, part in parts.items() if part.seal}  # once, not once per kept hit

        def kept_title(i: int) -> str:  # none of a sealed collection: a later page opens its stored chunks
            if sealed and place(i)[0] in sealed:
                return ""
            return pool.hit(fused[i].chunk_id).title

        def order(n: int) -> paging_pb2.KeptOrder:  # later pages' order: the fused hits copied whole
            head = kept[:n]
            return paging_pb2.KeptOrder(
                hits=[fused[i] for i in head], titles=[kept_title(i) for i in head],
                scores=[scores[i] for i in head], blended_scores=[finals[i] for i in head],
                rerank_scores=[reranked.rerank.get(i, 0.0) for i in head], reranked=[i in reranked.rerank for i in head])

        shown = kept[plan.offset : plan.offset + plan.top_k]
        await self.texts.fill(plan, [fused[i] for i in shown], pool, deadline, report)
        page, tags = [], []
        for rank, i in enumerate(shown, start=plan.offset):
            page.append(hit(i))
            part = parts[page[-1].collection]
            leg_hit = pool.shown(fused[i].chunk_id, part.seal is not None)  # a sealed one's metadata opened
            show(page[-1], plan.query, leg_hit.text, self.analyzer, rank, plan.effort, leg_hit, part.return_metadata)
            tags.append(leg_hit.metadata.get(part.config.tags_field, ""))
        reranked_n = len(reranked.rerank)
        response = search_pb2.SearchResponse(
            hits=page, legs=list(report.legs.values()), degraded=report.degraded, mode=plan.mode, effort=plan.effort,
            total_candidates=len(kept), notices=report.notices, tag_counts=tag_distribution(tags), offset=plan.offset,
            counts=result_counts(reranked_n, len(fused), len(page), plan.min_score, len(kept)),
            took_ms=(time.perf_counter() - report.started) * 1000,
        )
        if plan.explain:
            response.explain.CopyFrom(explanation(plan, place, fused, reranked, pool, report))
        if plan.context and page:
            await self.neighbours(response, plan, deadline)
        return Answer(response, order, len(kept))

    async def neighbours(self, response: search_pb2.SearchResponse, plan: SearchPlan, deadline: Deadline) -> None:
        """Each hit's `plan.context` neighbouring chunks before and after (SearchRequest.context), read from the
        stores its chunk lives in; a store that cannot answer leaves them out, noted."""
        page = list(response.hits)
        try:
            chunks = await self.texts.chunks([(h.collection, h.doc_id, h.chunk_id) for h in page], deadline, plan.stored_of)
        except Refusal as err:
            response.notices.append(f"context of {len(page)} hits not shown: {err}")
            return
        attach_context(page, chunks, plan.context)

    def calibrated(self, plan: SearchPlan, fused: list[fusion_pb2.FusedHit], reranked: Reranked, order: list[int],
                   pool: Pool, place: Callable[[int], tuple[str, str]] | None = None,
                   parts: dict[str, SearchPlan] | None = None) -> dict[int, float]:
        """Each hit's calibrated score (gateway.query.calibration), measured on its own collection's scale with its
        collection's boosts, shown non-increasing down the final order (which stays as it is). The candidates
        are measured together (calibration.own_scores), not one call chain per hit."""
        hits = [fused[i] for i in order]
        place = place or placed(plan, fused)
        parts = parts if parts is not None else {c: plan.plan_of(c) for c, _ in plan.configs}
        collections = [place(i)[0] for i in order]
        measures: dict[str, tuple[SearchPlan, Scale]] = {}  # each collection's plan and scale, made once
        for collection in dict.fromkeys(collections):
            part = parts.get(collection, plan)
            measures[collection] = part, scale_of(pool.lists_of(collection), part.fusion)
        boosts, capped_at = None, {}  # fusion-stage boosts of each hit; its rerank-stage factors (reranked ones)
        if any(part.config.boosts for part, _ in measures.values()):
            boosts = []
            for n, (i, hit, collection) in enumerate(zip(order, hits, collections)):
                collection_boosts = measures[collection][0].config.boosts
                metadata = pool.hit(hit.chunk_id).metadata if collection_boosts else {}
                boosts.append(math.prod(factors(metadata, collection_boosts, FUSION)) if collection_boosts else 1.0)
                if collection_boosts and i in reranked.rerank:
                    capped_at[n] = factors(metadata, collection_boosts, RERANK)
        # A reranked answer's hit outside the pool: the reranked scale, no verification (gateway.query.calibration).
        probabilities = weights = None
        if reranked.rerank:
            bands, tail = tuple(self.cfg.bands), self.cfg.tail_fusion_weight
            probabilities = [reranked.rerank.get(i, 0.0) for i in order]
            weights = [fusion_weight(i + 1, bands, tail) for i in order]
        own = own_scores([hit.evidence for hit in hits], [measures[c][1] for c in collections], boosts,
                         probabilities, weights)
        for n, rerank_factors in capped_at.items():
            own[n] = capped(own[n], rerank_factors)
        return dict(zip(order, non_increasing(own)))


def placed(plan: SearchPlan, fused: list[fusion_pb2.FusedHit]) -> Callable[[int], tuple[str, str]]:
    """(collection, chunk id) of fused hit i: several collections' merged keys split once, up front."""
    if not plan.parts:
        return lambda i: (plan.collection, fused[i].chunk_id)
    places = [split_key(f.chunk_id, plan.collection) for f in fused]
    return places.__getitem__


def passage_of(chunk_id: str) -> bool:
    """Whether a chunk id is the vector leg's own passage ("<doc>#p<n>") rather than a shared chunk."""
    return chunk_id.rpartition("#")[2].startswith("p")


def attach_context(page: list[search_pb2.SearchHit], chunks: dict[tuple[str, str], common_pb2.Chunk], n: int) -> None:
    """Each hit's `n` neighbours before (nearest first) and after, of the same kind (shared chunks or the
    vector leg's passages), from `chunks`: every stored chunk of the page's documents by (collection, chunk id)."""
    by_place = {(collection, c.doc_id, passage_of(c.chunk_id), c.position): c for (collection, _), c in chunks.items()}
    for hit in page:
        own = chunks.get((hit.collection, hit.chunk_id))
        if own is None:
            continue
        place = (hit.collection, hit.doc_id, passage_of(hit.chunk_id))
        for side, step in ((hit.context_before, -1), (hit.context_after, 1)):
            near = (by_place.get((*place, own.position + step * k)) for k in range(1, n + 1))
            side.extend(context_chunk(c) for c in near if c is not None)


def context_chunk(chunk: common_pb2.Chunk) -> search_pb2.ContextChunk:
    return search_pb2.ContextChunk(chunk_id=chunk.chunk_id, position=chunk.position, heading=chunk.heading,
                                   text=chunk.text, span=chunk.span if chunk.HasField("span") else None)


def search_hit(f: fusion_pb2.FusedHit, collection: str, chunk_id: str, title: str, score: float, blended: float,
               rerank_score: float, reranked: bool) -> search_pb2.SearchHit:
    """A fused hit, in `collection` as `chunk_id` (its merged key split), as the answer shows it (without its
    preview): first pages and later ones alike."""
    return search_pb2.SearchHit(
        doc_id=f.doc_id, chunk_id=chunk_id, title=title, score=score, blended_score=blended,
        fusion_score=f.normalized_score, rerank_score=rerank_score, reranked=reranked, collection=collection,
        legs=[search_pb2.LegRank(leg=e.leg, kind=e.kind, rank=e.rank, score=e.score) for e in f.evidence],
    )


def explanation(plan: SearchPlan, place: Callable[[int], tuple[str, str]], fused: list[fusion_pb2.FusedHit],
                reranked: Reranked, pool: Pool, report: Report) -> search_pb2.Explanation:
    exp = report.expansion or expansion_pb2.ExpandResponse()
    return search_pb2.Explanation(
        lexical_variants=exp.lexical_variants, semantic_variants=exp.semantic_variants, hyde=exp.hyde,
        expansion_generator=exp.generator, expansion_cache_hit=exp.cache_hit,
        leg_lists=pool.explained(),
        fusion_order=[explained_id(plan, place, fused, i) for i in range(min(len(fused), EXPLAINED_ORDER))],
        rerank_scores={explained_id(plan, place, fused, i): s for i, s in reranked.rerank.items()},
        fusion=report.fusion_applied or params_to_proto(plan.fusion), timings=report.timings,
        reranker_model=report.reranker_model, boosts=report.boosts,
        query_language=exp.language, query_language_source=exp.language_source,
        query_language_confidence=exp.language_confidence,
    )


def explained_id(plan: SearchPlan, place: Callable[[int], tuple[str, str]], fused: list[fusion_pb2.FusedHit],
                 i: int) -> str:
    """Fused hit i as explain names it: its doc id, "collection/doc_id" when several collections are
    searched (doc ids may repeat between them; collection names have no "/")."""
    return f"{place(i)[0]}/{fused[i].doc_id}" if plan.parts else fused[i].doc_id
