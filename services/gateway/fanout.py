"""Several collections in one query: fanned out, fused once more, deduplicated by content.

Each collection has its own plan (request.plan_search's `parts`: its own fields, fuzzy default, tag leg,
boosts, language) and runs the retrieval stages (legs and expansion, variants, fusion, graph) with a
trace of its own, all concurrently under the one deadline. The collections' fused lists are then fused
once more, weighted RRF with weight 1 per collection (`MERGE_RRF_K`), and hits of the same content are
kept once (as Gnosis' content-hash dedup: identical chunk text is the same content, whatever its id or
collection): the better placed one stays and takes the other's RRF share too. The one rerank and the
answer follow as for one collection (gateway.search).

Doc and chunk ids may repeat between collections, so the merged list keys each hit by its collection
and chunk id (`key`); the answer splits the key again (`split_key`) and each hit names its collection.

Leg states are kept per collection ("bm25@notes"): a leg that failed in one collection only degrades
the answer and must say where; the search is UNAVAILABLE only when no collection had a leg answer.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Awaitable, Callable, Sequence

from hybridsearch.v1 import common_pb2, fusion_pb2

MERGE_RRF_K = 60  # RRF's k for the cross-collection fusion (the collections' fused lists, weight 1 each)
SEP = "\x1f"      # between collection and chunk id in a merged key (no collection name or chunk id has it)


def key(collection: str, chunk_id: str) -> str:
    return f"{collection}{SEP}{chunk_id}"


def split_key(chunk_key: str, collection: str) -> tuple[str, str]:
    """(collection, chunk id) of a merged key; a plain chunk id belongs to `collection`."""
    if SEP in chunk_key:
        found, _, chunk_id = chunk_key.partition(SEP)
        return found, chunk_id
    return collection, chunk_key


def content_key(text: str) -> str | None:
    """What makes two chunks the same content: their text, whitespace aside (None for no text)."""
    normal = " ".join(text.split())
    return hashlib.sha256(normal.encode()).hexdigest() if normal else None


def merge(ranked: Sequence[tuple[str, Sequence[fusion_pb2.FusedHit]]], text_of: Callable[[str, str], str],
          limit: int, k: int = MERGE_RRF_K) -> list[fusion_pb2.FusedHit]:
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
    return [fusion_pb2.FusedHit(doc_id=f.doc_id, chunk_id=key(collection, f.chunk_id), fusion_score=score,
                                normalized_score=score / top, evidence=f.evidence)
            for score, _, f, collection in best]


async def fan_out(plan, trace, retrieve: Callable[..., Awaitable[list | None]],
                  limit: int) -> list[fusion_pb2.FusedHit] | None:
    """Runs `retrieve(part, part_trace)` for every collection of the plan at once and merges what they
    fused into `trace` (leg states, timings, notices, lists per collection); None when none retrieved."""
    traces = {part.collection: type(trace)() for part in plan.parts}
    results = await asyncio.gather(*(retrieve(part, traces[part.collection]) for part in plan.parts))
    for collection, part_trace in traces.items():
        _adopt(trace, collection, part_trace, plan.explain)
    def lookup(chunk_key: str):
        collection, chunk_id = split_key(chunk_key, plan.collection)
        return traces[collection].hit(chunk_id)
    trace.lookup = lookup
    answered = [(c, fused) for c, fused in zip(traces, results) if fused is not None]
    if not answered:
        return None
    t = time.perf_counter()
    merged = merge(answered, lambda c, chunk_id: traces[c].hit(chunk_id).text, limit)
    trace.timed("merge", t)
    return merged


def _adopt(trace, collection: str, part, explain: bool) -> None:
    """One collection's trace into the search's: names suffixed "@collection", notices prefixed."""
    for name, status in part.legs.items():
        trace.leg(f"{name}@{collection}", status.state, status.reason)
    trace.degraded |= part.degraded
    trace.timings += [type(t)(stage=f"{t.stage}@{collection}", ms=t.ms) for t in part.timings]
    trace.notices += [f"{collection}: {n}" for n in part.notices]
    trace.boosts += part.boosts
    trace.expansion = trace.expansion or part.expansion
    trace.fusion_applied = trace.fusion_applied or part.fusion_applied
    trace.part_lists[collection] = part.lists  # whole: the calibration's scale (gateway.calibration)
    if explain:  # explain names each list's collection in its query
        for rl in part.lists:
            named = common_pb2.RankedList(leg=rl.leg, kind=rl.kind, query=f"{rl.query} @{collection}",
                                          weight=rl.weight)
            named.hits.extend(rl.hits[:20])
            trace.lists.append(named)
