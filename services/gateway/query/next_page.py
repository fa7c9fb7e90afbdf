"""A later page: the first page's kept order (gateway.query.paging) from the token's offset, its previews built
from the stored chunks as a first page's are (gateway.query.previews.show_page); no leg, fusion or rerank runs
again."""

from __future__ import annotations

import time

from hybridsearch.bm25.analyzer import EnglishAnalyzer
from hybridsearch.gateway.query.context import attach_context
from hybridsearch.gateway.query.deadline import Deadline
from hybridsearch.gateway.query.keys import split_key
from hybridsearch.gateway.query.paging import Pager
from hybridsearch.gateway.query.previews import result_counts, search_hit, show_page
from hybridsearch.gateway.query.request import SearchPlan
from hybridsearch.gateway.query.texts import StoredTexts
from hybridsearch.v1 import search_pb2


async def next_page(request: search_pb2.SearchRequest, plan: SearchPlan, pager: Pager, texts: StoredTexts,
                    analyzer: EnglishAnalyzer, deadline: Deadline) -> search_pb2.SearchResponse:
    started = time.perf_counter()
    token, order, kept, following = await pager.page(request, plan.requested, plan.top_k, plan.readers_key)
    page = range(token.offset, min(token.offset + plan.top_k, len(kept)))
    home = [split_key(kept[i].chunk_id, plan.collection) for i in page]
    chunks = await texts.chunks([(c, kept[i].doc_id, chunk_id) for i, (c, chunk_id) in zip(page, home)],
                                deadline, plan.stored_of)
    sources = [chunks.get(place) for place in home]
    hits = [search_hit(kept[i], *place, order.titles[i], order.scores[i], order.blended_scores[i],
                       order.rerank_scores[i], order.reranked[i]) for i, place in zip(page, home)]
    tags = show_page(hits, sources, plan.query, analyzer, token.offset, plan.effort, plan.shows)
    first = order.head.counts  # the first page's: the candidates and the min_score's cut do not change
    counts = result_counts(sum(order.reranked), first.candidates or order.head.total_candidates, len(hits),
                           plan.min_score, first.above_min_score)
    if plan.context:
        attach_context(hits, chunks, plan.context)
    response = search_pb2.SearchResponse()
    response.CopyFrom(order.head)
    response.hits.extend(hits)
    response.offset = token.offset
    response.counts.CopyFrom(counts)
    response.tag_counts.update(tags)
    if missing := [h.doc_id for h, source in zip(hits, sources) if source is None]:
        response.notices.append(f"{len(missing)} hits of this page are no longer stored (deleted since): {missing[:5]}")
    response.next_page_token = following
    response.took_ms = (time.perf_counter() - started) * 1000
    return response
