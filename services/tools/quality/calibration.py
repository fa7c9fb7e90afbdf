"""Whether scores mean the same thing across queries (`hybridsearch bench --calibration`).

Every returned hit of every judged query is pooled as (score, relevant). A score comparable across queries
ranks the relevant hits of all queries above the irrelevant ones of all queries: the pooled ROC AUC and
average precision measure that (a per-query score, normalised to each query's best, mixes every query's
top hit in at ~1.0 and scores lower). Precision above a threshold is what `min_score` gives a client.
The answer's order plays no part here: the ranking metrics (nDCG@10) read the order alone.

Judged collections answer every query, which flatters a per-query score (every top hit is ~1.0, and most
are relevant). Queries of another domain run against the collection (`--unanswerable DIR`: every hit
irrelevant) show what min_score does where a collection has no answer: `answering` gives the share of
queries that still return a hit at each threshold.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

Judged = Sequence[tuple[float, bool]]  # (score, relevant) of every returned hit, all queries pooled
# min_score values a client picks (0.4-0.7), and the low ones a score floor is chosen among (docs/quality.md).
THRESHOLDS = (0.01, 0.02, 0.03, 0.04, 0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7)


def roc_auc(judged: Judged) -> float:
    """P(a relevant hit scores above an irrelevant one), ties counting half (Mann-Whitney U)."""
    ordered = sorted(judged, key=lambda j: j[0])
    positives = sum(r for _, r in ordered)
    negatives = len(ordered) - positives
    if not positives or not negatives:
        return float("nan")
    rank_sum, i = 0.0, 0
    while i < len(ordered):  # 1-based mid-ranks of each tied group
        j = i
        while j < len(ordered) and ordered[j][0] == ordered[i][0]:
            j += 1
        rank_sum += (i + 1 + j) / 2 * sum(r for _, r in ordered[i:j])
        i = j
    return (rank_sum - positives * (positives + 1) / 2) / (positives * negatives)


def average_precision(judged: Judged) -> float:
    """Average precision of the pooled hits sorted by score (ties: the relevant ones last, pessimistic)."""
    ordered = sorted(judged, key=lambda j: (-j[0], j[1]))
    found, total = 0, 0.0
    for rank, (_, relevant) in enumerate(ordered, start=1):
        if relevant:
            found += 1
            total += found / rank
    return total / found if found else float("nan")


def above(judged: Judged, threshold: float, relevant_total: int) -> dict:
    """What min_score=threshold keeps: hits, their precision, the share of all relevant returned hits."""
    kept = [r for s, r in judged if s >= threshold]
    return {"kept": len(kept), "precision": round(sum(kept) / len(kept), 4) if kept else None,
            "recall": round(sum(kept) / relevant_total, 4) if relevant_total else None}


def answering(tops: Sequence[float], thresholds: Iterable[float] = THRESHOLDS) -> dict[str, float]:
    """The share of queries that return anything at each min_score, from each query's top score (scores
    never rise down an answer, so a query returns a hit at t exactly when its top hit scores t or more)."""
    return {f"{t:.2f}": round(sum(top >= t for top in tops) / len(tops), 4) if tops else 0.0 for t in thresholds}


def report(judged: Judged, thresholds: Iterable[float] = THRESHOLDS) -> dict:
    relevant = sum(r for _, r in judged)
    return {"hits": len(judged), "relevant": relevant, "roc_auc": round(roc_auc(judged), 4),
            "average_precision": round(average_precision(judged), 4),
            "min_score": {f"{t:.2f}": above(judged, t, relevant) for t in thresholds}}
