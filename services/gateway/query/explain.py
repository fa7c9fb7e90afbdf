"""The explanation of an answer (SearchRequest.explain): what expansion generated, each leg's list, the fused order,
the rerank scores, the fusion applied, the stages' timings and the boosts."""

from __future__ import annotations

from collections.abc import Callable

from hybridsearch.gateway.query.pool import Pool
from hybridsearch.gateway.query.report import Report
from hybridsearch.gateway.query.request import SearchPlan
from hybridsearch.gateway.query.rerank import Reranked
from hybridsearch.fusion.packed import FusedDoc
from hybridsearch.v1 import expansion_pb2, search_pb2

EXPLAINED_ORDER = 100  # fused hits an explanation lists


def explanation(plan: SearchPlan, place: Callable[[int], tuple[str, str]], fused: list[FusedDoc],
                reranked: Reranked, pool: Pool, report: Report) -> search_pb2.Explanation:
    exp = report.expansion or expansion_pb2.ExpandResponse()
    return search_pb2.Explanation(
        lexical_variants=exp.lexical_variants, semantic_variants=exp.semantic_variants, hyde=exp.hyde,
        expansion_generator=exp.generator, expansion_cache_hit=exp.cache_hit,
        leg_lists=pool.explained(),
        fusion_order=[explained_id(plan, place, fused, i) for i in range(min(len(fused), EXPLAINED_ORDER))],
        rerank_scores={explained_id(plan, place, fused, i): s for i, s in reranked.rerank.items()},
        fusion=report.fusion_applied, timings=report.timings,
        reranker_model=report.reranker_model, boosts=report.boosts,
        query_language=exp.language, query_language_source=exp.language_source,
        query_language_confidence=exp.language_confidence,
    )


def explained_id(plan: SearchPlan, place: Callable[[int], tuple[str, str]], fused: list[FusedDoc],
                 i: int) -> str:
    """Fused hit i as explain names it: its doc id, "collection/doc_id" when several collections are
    searched (doc ids may repeat between them; collection names have no "/")."""
    return f"{place(i)[0]}/{fused[i].doc_id}" if plan.parts else fused[i].doc_id
