"""Position-aware blending of fusion and cross-encoder scores, with a keyword floor.

By default ranks 1-3 trust fusion 75/25, ranks 4-10 60/40, ranks 11+ 40/60 (GNO's bands; settings
rerank.bands / rerank.tail_fusion_weight change them). Before blending, a
candidate whose text contains the query's terms literally gets its rerank score raised to a floor
(0.30 x fraction of terms matched, as Gnosis does), so names and codes the cross-encoder cannot
read are not buried. Candidates with a rerank score under `score_floor` are dropped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

Bands = tuple[tuple[int, float], ...]  # (last rank of the band, fusion weight), ascending ranks
BANDS: Bands = ((3, 0.75), (10, 0.60))
TAIL_FUSION_WEIGHT = 0.40
KEYWORD_FLOOR = 0.30
TERM = re.compile(r"\w+", re.UNICODE)
SHORT_WORDS = frozenset("a an and are as at be by for from how in is it of on or the to was what when where which who why with".split())


def fusion_weight(position: int, bands: Bands = BANDS, tail: float = TAIL_FUSION_WEIGHT) -> float:
    """Fusion's share of the blended score for a 1-based position in fused order."""
    for last, weight in bands:
        if position <= last:
            return weight
    return tail


def keyword_floor(query: str, text: str) -> float:
    terms = {t for t in TERM.findall(query.lower()) if t not in SHORT_WORDS and len(t) > 1}
    if not terms:
        return 0.0
    words = set(TERM.findall(text.lower()))
    return KEYWORD_FLOOR * len(terms & words) / len(terms)


@dataclass
class Blended:
    index: int          # position of the candidate in the input (fused) order
    final: float
    rerank: float       # rerank score after the keyword floor


def blend(query: str, fusion_scores: list[float], rerank_scores: list[float], texts: list[str],
          score_floor: float = 0.0, bands: Bands = BANDS, tail: float = TAIL_FUSION_WEIGHT) -> list[Blended]:
    """Blends the reranked head of a fused list; returns it re-sorted, best first."""
    out = []
    for i, (fusion, rerank, text) in enumerate(zip(fusion_scores, rerank_scores, texts)):
        rerank = max(rerank, keyword_floor(query, text))
        if rerank < score_floor:
            continue
        w = fusion_weight(i + 1, bands, tail)
        out.append(Blended(i, w * fusion + (1 - w) * rerank, rerank))
    out.sort(key=lambda b: (-b.final, b.index))
    return out
