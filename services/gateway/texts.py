"""Which leg hits travel with their text, and the few texts the answer needs that did not.

A leg answers `leg_depth` (100) hits a list; fusion reads only their ids, ranks and scores. Texts are for
the page's previews and the reranker's pool, and they are most of a leg's answer (100 SciFact hits: 161 KB,
nine bytes in ten of it text), serialised by the leg, carried over the hop and parsed by the gateway for
hits nobody will see. So a search asks its legs for texts down to `text_depth` only: twice what its page
and its rerank pool can reach, so the hits fused into the answer almost always brought their own. The
rest (a hit ranked deep in every list, a page far down, hits pushed up by boosts or min_score) are read
from the store afterwards, in one GetChunks call per store, only for the hits that are shown or reranked.

Several collections in one query keep every text: fan-out deduplicates their hits by content.
"""

from __future__ import annotations

from hybridsearch.common.config import Settings
from hybridsearch.gateway.rerank_policy import pool_bound

MARGIN = 2  # texts down to twice the deepest rank the page or the rerank pool reads


def text_depth(plan, settings: Settings) -> int:
    """How deep each leg list carries texts for this search (0: every hit)."""
    if plan.parts:
        return 0
    reach = max(plan.offset + plan.top_k, pool_bound(plan.rerank_requested, plan.effort, settings.rerank))
    depth = MARGIN * reach
    return 0 if depth >= settings.leg_depth else depth
