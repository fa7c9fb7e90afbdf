"""Whether a search reranks, and with how many candidates: one pure decision (unit-tested over a table).

Inputs: what the request asked (`rerank` true / false / unset), its effort, the reranker model Triton
serves (or why it could not be asked), the rerank settings and how many fused candidates there are.
The order of the rules is the order a reader would check them:

  1. asked not to                                   -> skipped
  2. unset and the effort never reranks (FAST)      -> skipped (decided without asking Triton)
  3. the model cannot be asked (Triton down, breaker open):
       a rerank the plan would have run             -> FAILED (the answer is degraded and says so)
       otherwise                                    -> skipped
  4. unset, model untrained, untrained not allowed  -> skipped
  5. unset, the effort reranks only if configured (BALANCED) and rerank.in_balanced is off -> skipped
  6. fewer fused candidates than rerank.min_candidates -> skipped
  7. less of the deadline left than rerank.min_time_s -> skipped (the answer notes it: fused order)
  8. otherwise rerank the head: the pool by device (GPU / CPU) and depth (the effort's deep_rerank_pool)

What each effort implies is query.effort's table; this module only reads it.
"""

from __future__ import annotations

from dataclasses import dataclass

from hybridsearch.config.search import QuerySettings, RerankSettings
from hybridsearch.query.effort import RerankDefault, effort_policy
from hybridsearch.v1 import search_pb2


@dataclass(frozen=True)
class ModelInfo:
    name: str
    trained: bool
    gpu: bool

    @classmethod
    def of(cls, info: dict) -> ModelInfo:
        return cls(info["name"], info["trained"], info["gpu"])


@dataclass(frozen=True)
class RerankDecision:
    run: bool
    state: int = search_pb2.LEG_STATE_SKIPPED  # when not run: SKIPPED, or FAILED (the answer is degraded)
    reason: str = ""
    pool: int = 0
    notice: str = ""  # what the answer must say about it (a rerank the deadline left no time for)


def skipped(reason: str) -> RerankDecision:
    return RerankDecision(False, search_pb2.LEG_STATE_SKIPPED, reason)


def needs_model(requested: bool | None, effort: int) -> RerankDecision | None:
    """Rules 1-2: a decision the request alone makes (None: the model must be asked)."""
    if requested is False:
        return skipped("not requested")
    if requested is None and effort_policy(effort).rerank is RerankDefault.NEVER:
        return skipped(f"{effort_policy(effort).name} effort")
    return None


def pool_bound(requested: bool | None, effort: int, cfg: RerankSettings) -> int:
    """The most candidates a search could rerank, known before fusion and before Triton is asked (0: it
    cannot rerank): the deeper of the device pools of its depth."""
    policy = effort_policy(effort)
    if needs_model(requested, effort) is not None or (requested is None and not policy.reranks_unasked(cfg.in_balanced)):
        return 0
    if policy.deep_rerank_pool:
        return max(cfg.pool_gpu_deep, cfg.pool_cpu_deep)
    return max(cfg.pool_gpu_standard, cfg.pool_cpu)


def decide_rerank(requested: bool | None, effort: int, cfg: RerankSettings, model: ModelInfo | None,
                  unavailable: str = "", candidates: int = 0, time_left_s: float = float("inf")) -> RerankDecision:
    """The whole decision; `model` None means it could not be asked (`unavailable` says why); `time_left_s`
    is what the search's deadline leaves."""
    if (early := needs_model(requested, effort)) is not None:
        return early
    policy = effort_policy(effort)
    if model is None:
        would_run = requested or policy.reranks_unasked(cfg.in_balanced)
        state = search_pb2.LEG_STATE_FAILED if would_run else search_pb2.LEG_STATE_SKIPPED
        return RerankDecision(False, state, f"reranker unavailable: {unavailable}")
    if requested is None and not model.trained and not cfg.allow_untrained:
        return skipped("reranker model is untrained")
    if requested is None and not policy.reranks_unasked(cfg.in_balanced):
        return skipped(f"off in {policy.name.upper()} (rerank.in_balanced: see docs/quality.md)")
    if model.gpu:
        pool = cfg.pool_gpu_deep if policy.deep_rerank_pool else cfg.pool_gpu_standard
    else:
        pool = cfg.pool_cpu_deep if policy.deep_rerank_pool else cfg.pool_cpu
    if min(pool, candidates) < cfg.min_candidates:
        return skipped(f"fewer than {cfg.min_candidates} candidates")
    if time_left_s < cfg.min_time_s:
        why = f"deadline: {max(0.0, time_left_s) * 1000:.0f} ms left, rerank needs {cfg.min_time_s * 1000:.0f} ms"
        return RerankDecision(False, search_pb2.LEG_STATE_SKIPPED, why,
                              notice=f"rerank skipped ({why}): the answer is in fused order")
    return RerankDecision(True, search_pb2.LEG_STATE_OK, f"{model.name}: {min(pool, candidates)} candidates",
                          min(pool, candidates))


MARGIN = 2  # texts down to twice the deepest rank the page or the rerank pool reads


def text_depth(plan, cfg: QuerySettings, rerank: RerankSettings) -> int:
    """How deep each leg list carries texts for this search (0: every hit): twice the deepest rank the page or
    the rerank pool reads, so that a reranked or shown hit rarely needs its text read from a store (gateway.query.texts)."""
    if plan.parts:
        return 0
    reach = max(plan.offset + plan.top_k, pool_bound(plan.rerank_requested, plan.effort, rerank))
    depth = MARGIN * reach
    return 0 if depth >= cfg.leg_depth else depth
