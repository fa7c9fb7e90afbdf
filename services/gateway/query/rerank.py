"""The rerank stage: the head of the fused list scored by the cross-encoder on Triton and blended by
position (reranker.blend), when gateway.query.rerank_policy decides so. A reranker that fails leaves the fused
order (the answer is degraded and says so)."""

from __future__ import annotations

from dataclasses import dataclass, field

from hybridsearch.config.search import RerankSettings
from hybridsearch.gateway.backends import Backends
from hybridsearch.gateway.breakers import Breakers
from hybridsearch.gateway.query.deadline import Deadline, reason
from hybridsearch.gateway.query.observed import observed
from hybridsearch.gateway.query.pool import Pool
from hybridsearch.gateway.query.report import FAILED, OK, LegStatus, Report
from hybridsearch.gateway.query.request import SearchPlan
from hybridsearch.gateway.query.rerank_policy import ModelInfo, decide_rerank, needs_model
from hybridsearch.gateway.query.texts import StoredTexts
from hybridsearch.reranker.blend import blend
from hybridsearch.fusion.packed import FusedDoc
from hybridsearch.v1 import common_pb2

NAME = "rerank"


@dataclass
class Reranked:
    """Fused indexes in final order; rerank and blended scores for the reranked head."""

    order: list[int]
    rerank: dict[int, float] = field(default_factory=dict)
    final: dict[int, float] = field(default_factory=dict)

    def final_scores(self, fused: list[FusedDoc]) -> dict[int, float]:
        """Blended scores for the head; the tail keeps fusion order, scaled to sit below the head."""
        if not self.final:
            return {i: f.normalized_score for i, f in enumerate(fused)}
        floor = min(self.final.values())
        head_end = max(self.rerank) + 1
        tail = [fused[i].normalized_score for i in self.order if i >= head_end]
        tail_top = max(tail, default=1.0) or 1.0
        return {
            i: self.final[i] if i in self.final else floor * 0.999 * fused[i].normalized_score / tail_top
            for i in self.order
        }


class Reranker:
    def __init__(self, cfg: RerankSettings, backends: Backends, breakers: Breakers, texts: StoredTexts) -> None:
        self.cfg, self.backends, self.breaker, self.texts = cfg, backends, breakers.of(NAME), texts

    async def rerank(self, plan: SearchPlan, fused: list[FusedDoc], pool: Pool, deadline: Deadline,
                     report: Report) -> Reranked:
        unchanged = Reranked(order=list(range(len(fused))))
        decision = needs_model(plan.rerank_requested, plan.effort)
        if decision is None:
            model, unavailable = await self._model(report)
            decision = decide_rerank(plan.rerank_requested, plan.effort, self.cfg, model, unavailable, len(fused),
                                     deadline.remaining())
            if decision.notice:
                report.notices.append(decision.notice)
        if not decision.run:
            report.legs[NAME] = LegStatus(name=NAME, state=decision.state, reason=decision.reason)
            return unchanged
        head = fused[:decision.pool]
        await self.texts.fill(plan, head, pool, deadline, report)
        passages = [passage(pool.hit(h.chunk_id)) for h in head]
        with observed(NAME) as span:
            span.set_attribute("rerank.pool", len(head))
            try:
                async with self.breaker.guard():
                    scores = await self.backends.reranker.score(plan.query, passages, deadline.left())
            except Exception as err:  # Triton's client raises its own errors besides gRPC's
                report.legs[NAME] = LegStatus(name=NAME, state=FAILED, reason=reason(err))
                return unchanged
        blended = blend(plan.query, [h.normalized_score for h in head], scores, passages, self.cfg.score_floor,
                        tuple(self.cfg.bands), self.cfg.tail_fusion_weight)
        report.legs[NAME] = LegStatus(name=NAME, state=OK, reason=decision.reason)
        return Reranked(
            order=[b.index for b in blended] + list(range(len(head), len(fused))),
            rerank={b.index: b.rerank for b in blended},
            final={b.index: b.final for b in blended},
        )

    async def _model(self, report: Report) -> tuple[ModelInfo | None, str]:
        """The model Triton serves, or why it could not be asked."""
        try:
            async with self.breaker.guard():
                model = ModelInfo.of(await self.backends.reranker.model_info())
        except Exception as err:  # Triton down or model not loaded, or its breaker open
            return None, reason(err)
        report.reranker_model = model.name
        if not model.trained:
            report.notices.append(f"reranker model {model.name!r} is untrained (fresh classification head)")
        return model, ""


def passage(hit: common_pb2.LegHit) -> str:
    return f"{hit.title}\n{hit.text}" if hit.title else hit.text
