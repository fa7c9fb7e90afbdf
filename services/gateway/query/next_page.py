"""A later page: the first page's kept order (gateway.query.paging) from the token's offset, its previews built
from the stored chunks; no leg, fusion or rerank runs again."""

from __future__ import annotations

import time

from hybridsearch.bm25.analyzer import EnglishAnalyzer
from hybridsearch.gateway.query.deadline import Deadline
from hybridsearch.gateway.query.keys import split_key
from hybridsearch.gateway.query.paging import Pager
from hybridsearch.gateway.query.previews import result_counts, show, tag_distribution
from hybridsearch.gateway.query.request import SearchPlan
from hybridsearch.gateway.query.respond import attach_context, search_hit
from hybridsearch.gateway.query.texts import StoredTexts
from hybridsearch.v1 import search_pb2


async def next_page(request: search_pb2.SearchRequest, plan: SearchPlan, pager: Pager, texts: StoredTexts,
                    analyzer: EnglishAnalyzer, deadline: Deadline) -> search_pb2.SearchResponse:
    started = time.perf_counter()
    token, order = await pager.order(request)
    page = range(token.offset, min(token.offset + plan.top_k, len(order.hits)))
    hits = [search_hit(order.hits[i], *split_key(order.hits[i].chunk_id, plan.collection), order.titles[i],
                       order.scores[i], order.blended_scores[i], order.rerank_scores[i], order.reranked[i]) for i in page]
    home = [(h.collection, h.chunk_id) for h in hits]
    chunks = await texts.chunks([(c, h.doc_id, h.chunk_id) for (c, _), h in zip(home, hits)], deadline, plan.stored_of)
    tags = []
    for rank, (hit, place) in enumerate(zip(hits, home), start=token.offset):
        chunk = chunks.get(place)
        if chunk and not hit.title:  # a hit kept from below the legs' text depth
            hit.title = chunk.title
        show(hit, plan.query, chunk.text if chunk else "", analyzer, rank, plan.effort, chunk,
             plan.plan_of(hit.collection).return_metadata)
        tags.append(chunk.metadata.get(plan.config_of(hit.collection).tags_field, "") if chunk else "")
    if plan.context:
        attach_context(hits, chunks, plan.context)
    response = search_pb2.SearchResponse()
    response.CopyFrom(order.head)
    response.hits.extend(hits)
    response.offset = token.offset
    reranked = sum(order.reranked)
    first = order.head.counts  # the first page's: the candidates and the min_score's cut do not change
    response.counts.CopyFrom(result_counts(reranked, first.candidates or order.head.total_candidates, len(hits),
                                           plan.min_score, first.above_min_score))
    response.tag_counts.update(tag_distribution(tags))
    if missing := [h.doc_id for h, place in zip(hits, home) if place not in chunks]:
        response.notices.append(f"{len(missing)} hits of this page are no longer stored (deleted since): {missing[:5]}")
    following = token.offset + plan.top_k
    if following < len(order.hits):
        response.next_page_token = pager.tokens.issue(token.order_id, following, token.digest)
    response.took_ms = (time.perf_counter() - started) * 1000
    return response
