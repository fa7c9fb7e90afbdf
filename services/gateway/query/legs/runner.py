"""Runs one leg's call the same way wherever it is called from (retrieval's originals and variants, link
expansion): its request, its breaker, its budget, the straggler cut-off of its round, and what is reported.

It returns the leg's ranked lists (each weighted by its query kind) or None when the call failed; the
report says why: a failed original (or graph) call is a FAILED leg and degrades the answer, failed variant
queries are a notice (the leg's original list still counts). INVALID_ARGUMENT from a leg is the request's
fault, not the leg's: it is raised for the caller to hear.
"""

from __future__ import annotations

import logging
import time

import grpc

from hybridsearch.config.search import QuerySettings, RerankSettings, ResilienceSettings
from hybridsearch.gateway.query.legs.protocol import LegSettings
from hybridsearch.contract.errors import InvalidArgument
from hybridsearch.gateway.backends import Backends
from hybridsearch.gateway.breakers import Breakers
from hybridsearch.gateway.query.deadline import CALL_ERRORS, Deadline, reason
from hybridsearch.gateway.query.legs.stragglers import Stragglers
from hybridsearch.gateway.query.legs.protocol import RetrievalLeg
from hybridsearch.gateway.query.observed import observed
from hybridsearch.gateway.query.report import FAILED, OK, LegStatus, Report, StageTiming
from hybridsearch.gateway.query.request import SearchPlan
from hybridsearch.gateway.query.rerank_policy import text_depth
from hybridsearch.v1 import common_pb2

log = logging.getLogger(__name__)


class LegRunner:
    def __init__(self, cfg: QuerySettings, resilience: ResilienceSettings, rerank: RerankSettings, legs: LegSettings,
                 backends: Backends, breakers: Breakers) -> None:
        self.cfg, self.resilience, self.rerank, self.legs = cfg, resilience, rerank, legs
        self.backends, self.breakers = backends, breakers

    def stragglers(self, calls: int) -> Stragglers | None:
        """A cut-off for a round of `calls` calls (none for a call alone: it has nobody to wait for)."""
        return Stragglers(self.resilience.straggler_grace_s, self.resilience.straggler_factor) if calls > 1 else None

    async def run(self, leg: RetrievalLeg, plan: SearchPlan, queries: list[common_pb2.LegQuery], deadline: Deadline,
                  report: Report, *, variants: bool = False,
                  stragglers: Stragglers | None = None) -> list[common_pb2.RankedList] | None:
        weights = kind_weights(plan)
        base = common_pb2.LegSearchRequest(collection=plan.store_name, queries=queries, limit=self.cfg.leg_depth,
                                           filters=plan.filters, metadata_fields=plan.metadata_fields,
                                           text_depth=text_depth(plan, self.cfg, self.rerank), readers=plan.readers)
        request = leg.request(base, plan, self.legs)
        stage = f"{leg.name}{'.variants' if variants else ''}"
        called = time.perf_counter()
        with observed(stage):
            try:
                async with self.breakers.guard(leg.part):
                    call = leg.call(self.backends, request, min(deadline.left(), self.resilience.leg_timeout_s))
                    response = await (stragglers.call(call) if stragglers is not None else call)
            except CALL_ERRORS as err:
                if isinstance(err, grpc.aio.AioRpcError) and err.code() == grpc.StatusCode.INVALID_ARGUMENT:
                    raise InvalidArgument(f"{leg.name}: {err.details()}") from err
                if variants:
                    report.notices.append(f"{leg.name} variant queries failed: {reason(err)}")
                else:
                    report.legs[leg.name] = LegStatus(name=leg.name, state=FAILED, reason=reason(err))
                    log.warning("%s leg failed: %s", leg.name, reason(err))
                return None
        if stragglers is not None:
            stragglers.answered()
        # The call as the gateway saw it, then the service's own parts: the difference is the hop.
        took = time.perf_counter() - called
        report.timings.append(StageTiming(stage=f"leg.{stage}", ms=took * 1000))
        report.timings += [StageTiming(stage=f"leg.{stage}.{part}", ms=ms) for part, ms in sorted(response.timings_ms.items())]
        for rl in response.lists:
            rl.weight = weights.get(rl.kind, 1.0)
        if not variants:
            late = f"; late: {took * 1000:.0f} ms" if took > self.resilience.leg_late_s else ""
            report.legs[leg.name] = LegStatus(name=leg.name, state=OK, reason=response.engine + late)
        return list(response.lists)


def kind_weights(plan: SearchPlan) -> dict[int, float]:
    """A list's fusion weight by the kind of query that made it (the leg's weight is fusion's to apply); 1 for
    any other kind."""
    return {
        common_pb2.QUERY_KIND_LEXICAL_VARIANT: plan.fusion.variant_weight,
        common_pb2.QUERY_KIND_SEMANTIC_VARIANT: plan.fusion.variant_weight,
        common_pb2.QUERY_KIND_HYDE: plan.fusion.hyde_weight,
        common_pb2.QUERY_KIND_FEEDBACK: plan.fusion.feedback_weight,
    }
