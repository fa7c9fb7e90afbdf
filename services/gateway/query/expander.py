"""The expansion call: the variant queries and HyDE passage of one query (the expansion service, cached in
Redis), or None when the plan does not expand or the call failed (the report says which).

Its budget is what the search's deadline leaves after `expansion_reserve_s`, the time the variants, fusion
and rerank still need once expansion has answered (docs/performance.md: the THOROUGH budget)."""

from __future__ import annotations

import asyncio

from hybridsearch.config.search import QuerySettings
from hybridsearch.query.effort import effort_policy
from hybridsearch.gateway.backends import Backends
from hybridsearch.gateway.breakers import Breakers
from hybridsearch.gateway.query.deadline import CALL_ERRORS, Deadline, reason
from hybridsearch.gateway.query.observed import observed
from hybridsearch.gateway.query.report import FAILED, FALLBACK, OK, SKIPPED, LegStatus, Report
from hybridsearch.gateway.query.request import SearchPlan
from hybridsearch.v1 import common_pb2, expansion_pb2

NAME = "expansion"
MIN_BUDGET_S = 0.05


class Expander:
    def __init__(self, cfg: QuerySettings, backends: Backends, breakers: Breakers) -> None:
        self.cfg, self.backends, self.breaker = cfg, backends, breakers.of(NAME)

    def budget(self, deadline: Deadline) -> float:
        return max(MIN_BUDGET_S, deadline.left() - self.cfg.expansion_reserve_s)

    async def expand(self, plan: SearchPlan, deadline: Deadline, report: Report) -> expansion_pb2.ExpandResponse | None:
        if (why := plan.no_expansion) is not None:
            report.legs[NAME] = LegStatus(name=NAME, state=SKIPPED, reason=why)
            return None
        request = expansion_pb2.ExpandRequest(query=plan.query, collection=plan.store_name, effort=plan.effort,
                                              filters=plan.filters, force=plan.expand is True,
                                              language=plan.language, fuzzy=plan.fuzzy, readers=plan.readers)
        with observed(NAME):
            try:
                async with self.breaker.guard():
                    if effort_policy(plan.effort).keeps_prf:
                        exp = await self._with_prf(request, deadline)
                    else:
                        exp = await self.backends.expansion.Expand(request, timeout=self.budget(deadline))
            except CALL_ERRORS as err:
                report.legs[NAME] = LegStatus(name=NAME, state=FAILED, reason=reason(err))
                return None
        report.expansion = exp
        if not exp.cache_available:
            report.notices.append("expansion cache (Redis) is not reachable: expansion runs uncached")
        if exp.fallback_reason:
            report.legs[NAME] = LegStatus(name=NAME, state=FALLBACK, reason=exp.fallback_reason)
            report.notices.append(f"expansion: {exp.fallback_reason}")
        elif exp.skipped:
            report.legs[NAME] = LegStatus(name=NAME, state=SKIPPED, reason=exp.skip_reason)
        else:
            report.legs[NAME] = LegStatus(name=NAME, state=OK, reason=f"{exp.generator}{' (cached)' if exp.cache_hit else ''}")
        return exp


    async def _with_prf(self, request: expansion_pb2.ExpandRequest,
                        deadline: Deadline) -> expansion_pb2.ExpandResponse:
        """The effort's expansion (the LLM's) with BALANCED's feedback variants added beside it: both asked at
        once; the feedback one is cheap (a BM25 probe, cached) and may fail alone."""
        prf = expansion_pb2.ExpandRequest()
        prf.CopyFrom(request)
        prf.effort, prf.force = common_pb2.EFFORT_BALANCED, True
        timeout = self.budget(deadline)
        exp, feedback = await asyncio.gather(self.backends.expansion.Expand(request, timeout=timeout),
                                             self.backends.expansion.Expand(prf, timeout=timeout),
                                             return_exceptions=True)
        if isinstance(exp, BaseException):
            raise exp
        if isinstance(feedback, BaseException) or feedback.skipped or exp.skipped:
            return exp  # a strong signal skips both alike; a failed feedback call leaves the LLM's
        keep_llm_variants = effort_policy(request.effort).llm_variants
        for field in ("lexical_variants", "semantic_variants"):
            mine, theirs = getattr(exp, field), list(getattr(feedback, field))
            if not keep_llm_variants and not exp.fallback_reason:
                del mine[:]  # the LLM's HyDE passage stays; its rewrites lost to PRF's (docs/quality.md)
            mine.extend(v for v in theirs if v not in mine)
        return exp


def variant_queries(expansion: expansion_pb2.ExpandResponse | None) -> list[common_pb2.LegQuery]:
    """The expansion's variant queries, each of its kind (the legs pick the kinds they take)."""
    if expansion is None or expansion.skipped:
        return []
    queries = [common_pb2.LegQuery(text=v, kind=common_pb2.QUERY_KIND_LEXICAL_VARIANT) for v in expansion.lexical_variants]
    queries += [common_pb2.LegQuery(text=v, kind=common_pb2.QUERY_KIND_SEMANTIC_VARIANT) for v in expansion.semantic_variants]
    if expansion.hyde:
        queries.append(common_pb2.LegQuery(text=expansion.hyde, kind=common_pb2.QUERY_KIND_HYDE))
    return queries
