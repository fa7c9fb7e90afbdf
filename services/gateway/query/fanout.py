"""Several collections in one query: fanned out, fused once more, deduplicated by content.

Each collection has its own plan (request.plan_search's `parts`: its own fields, fuzzy default, tag leg,
boosts, language) and runs the retrieval stages (legs and expansion, variants, fusion, graph) with a
report and pool of its own, all concurrently under the one deadline. The collections' fused lists are then fused
once more, weighted RRF with weight 1 per collection (`MERGE_RRF_K`), and hits of the same content are
kept once (as Gnosis' content-hash dedup: identical chunk text is the same content, whatever its id or
collection): the better placed one stays and takes the other's RRF share too. The one rerank and the
answer follow as for one collection (gateway.query.search).

Doc and chunk ids may repeat between collections, so the merged list keys each hit by its collection
and chunk id (`key`); the answer splits the key again (`split_key`) and each hit names its collection.

Leg states are kept per collection ("bm25@notes"): a leg that failed in one collection only degrades
the answer and must say where; the search is UNAVAILABLE only when no collection had a leg answer.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence

from hybridsearch.gateway.query.keys import SEP, key, split_key  # noqa: F401  (merged keys: re-exported)
from hybridsearch.gateway.query.pool import Pool, trimmed
from hybridsearch.gateway.query.report import Report
from hybridsearch.fusion.packed import FusedDoc
from hybridsearch.v1 import common_pb2

MERGE_RRF_K = 60  # RRF's k for the cross-collection fusion (the collections' fused lists, weight 1 each)

# One collection's retrieval (legs, expansion, variants, fusion, graph): its fused list and the lists it was
# fused from, or None when none of its legs answered.
Retrieval = Callable[..., Awaitable[tuple[list[FusedDoc], Pool] | None]]


class MergedPool:
    """The pools of several collections, addressed by merged keys (gateway.query.fanout.key)."""

    def __init__(self, parts: Mapping[str, Pool], primary: str) -> None:
        self.parts, self.primary = dict(parts), primary

    def hit(self, chunk_key: str) -> common_pb2.LegHit:
        collection, chunk_id = split_key(chunk_key, self.primary)
        return self.parts[collection].hit(chunk_id)

    def fill(self, chunk_key: str, chunk: common_pb2.Chunk) -> None:
        collection, chunk_id = split_key(chunk_key, self.primary)
        self.parts[collection].fill(chunk_id, chunk)

    def open(self, chunk_key: str, content: common_pb2.Chunk) -> None:
        collection, chunk_id = split_key(chunk_key, self.primary)
        self.parts[collection].open(chunk_id, content)

    def shown(self, chunk_key: str, sealed: bool = False) -> common_pb2.LegHit:
        collection, chunk_id = split_key(chunk_key, self.primary)
        return self.parts[collection].shown(chunk_id, sealed)

    def lists_of(self, collection: str) -> list[common_pb2.RankedList]:
        return self.parts[collection].lists

    def explained(self) -> list[common_pb2.RankedList]:
        """Every collection's lists, each naming its collection in its query."""
        return [trimmed(rl, f" @{collection}") for collection, pool in self.parts.items() for rl in pool.lists]


def content_key(text: str) -> str | None:
    """What makes two chunks the same content: their text, whitespace aside (None for no text)."""
    normal = " ".join(text.split())
    return hashlib.sha256(normal.encode()).hexdigest() if normal else None


def merge(ranked: Sequence[tuple[str, Sequence[FusedDoc]]], text_of: Callable[[str, str], str],
          limit: int, k: int = MERGE_RRF_K) -> list[FusedDoc]:
    """The collections' fused lists (in request order) fused by RRF into one list of merged keys,
    one hit per content; scores are the RRF sums, normalized to the best."""
    kept: dict[str, list] = {}  # content -> [score, rank in its list, FusedHit, collection]
    for collection, hits in ranked:
        for rank, f in enumerate(hits, start=1):
            share = 1.0 / (k + rank)
            content = content_key(text_of(collection, f.chunk_id)) or key(collection, f.chunk_id)
            if (entry := kept.get(content)) is None:
                kept[content] = [share, rank, f, collection]
                continue
            entry[0] += share
            if rank < entry[1]:  # the better placed copy stays (ties: the earlier collection)
                entry[1:] = [rank, f, collection]
    best = sorted(kept.values(), key=lambda e: -e[0])[:limit]  # stable: ties keep request order
    top = best[0][0] if best else 1.0
    return [FusedDoc(f.doc_id, key(collection, f.chunk_id), score, score / top, list(f.evidence))
            for score, _, f, collection in best]


async def fan_out(plan, retrieve: Retrieval, report: Report,
                  limit: int) -> tuple[list[FusedDoc], MergedPool] | None:
    """Runs `retrieve(part, part_report)` for every collection of the plan at once, adopts each collection's
    report into `report` and merges what they fused; None when no collection retrieved anything."""
    reports = {part.collection: Report() for part in plan.parts}
    results = await asyncio.gather(*(retrieve(part, reports[part.collection]) for part in plan.parts))
    for collection, part_report in reports.items():
        report.adopt(collection, part_report)
    answered = {c: result for c, result in zip(reports, results) if result is not None}
    if not answered:
        return None
    pool = MergedPool({c: part_pool for c, (_, part_pool) in answered.items()}, plan.collection)
    t = time.perf_counter()
    merged = merge([(c, fused) for c, (fused, _) in answered.items()],
                   lambda c, chunk_id: answered[c][1].hit(chunk_id).text, limit)
    report.timed("merge", t)
    return merged, pool
