"""What each effort level implies, in one table: every place that decides by effort reads it here
(the gateway's deadline, expansion, Rocchio feedback, the rerank decision; the expansion service's
generator). The proto's Effort comments summarise the same rows.

    effort    expansion                    Rocchio  rerank when not asked     rerank pool  deadline
    FAST      none                         no       never (Triton not asked)  -            search_deadline_s
    BALANCED  PRF (if prf_in_balanced)     yes      if rerank.in_balanced     standard     search_deadline_s
    THOROUGH  PRF and the LLM's, else PRF  yes      yes                       deep         thorough_deadline_s

THOROUGH keeps BALANCED's feedback variants and adds the LLM's beside them (`keeps_prf`): the most
expensive effort never fuses less than the cheaper one (docs/quality.md "THOROUGH's policy": the packaged
0.5B model's variants alone lost to PRF's on Cranfield).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from types import MappingProxyType

from hybridsearch.v1 import common_pb2


class Expansion(Enum):
    NONE = "none"   # no expansion: the bare legs
    PRF = "prf"     # pseudo-relevance feedback variants
    LLM = "llm"     # the LLM when one is configured, PRF otherwise


class RerankDefault(Enum):
    """Whether a request that does not say reranks."""

    NEVER = "never"              # decided without asking Triton
    IF_CONFIGURED = "configured"  # rerank.in_balanced decides (docs/quality.md)
    ALWAYS = "always"


@dataclass(frozen=True)
class EffortPolicy:
    name: str
    expansion: Expansion
    prf_only_if_configured: bool  # PRF runs only when expansion.prf_in_balanced is on
    rocchio_feedback: bool        # the vector leg's Rocchio feedback list
    rerank: RerankDefault
    deep_rerank_pool: bool        # rerank.pool_*_deep rather than the standard pool
    long_deadline: bool           # thorough_deadline_s (waits for an LLM) rather than search_deadline_s
    keeps_prf: bool = False       # an LLM expansion adds to the PRF variants BALANCED fuses, never replaces them
    llm_variants: bool = True     # with keeps_prf: the LLM's rewrites are fused too (else only its HyDE passage)

    @property
    def expands(self) -> bool:
        return self.expansion is not Expansion.NONE

    def reranks_unasked(self, in_balanced: bool) -> bool:
        """Whether a request that does not say reranks (given the model allows it)."""
        return self.rerank is RerankDefault.ALWAYS or (self.rerank is RerankDefault.IF_CONFIGURED and in_balanced)

    def deadline_s(self, search_deadline_s: float, thorough_deadline_s: float) -> float:
        return thorough_deadline_s if self.long_deadline else search_deadline_s


EFFORTS: MappingProxyType[int, EffortPolicy] = MappingProxyType({
    common_pb2.EFFORT_FAST: EffortPolicy("fast", Expansion.NONE, prf_only_if_configured=False,
                                         rocchio_feedback=False, rerank=RerankDefault.NEVER,
                                         deep_rerank_pool=False, long_deadline=False),
    common_pb2.EFFORT_BALANCED: EffortPolicy("balanced", Expansion.PRF, prf_only_if_configured=True,
                                             rocchio_feedback=True, rerank=RerankDefault.IF_CONFIGURED,
                                             deep_rerank_pool=False, long_deadline=False),
    common_pb2.EFFORT_THOROUGH: EffortPolicy("thorough", Expansion.LLM, prf_only_if_configured=False,
                                             rocchio_feedback=True, rerank=RerankDefault.ALWAYS,
                                             deep_rerank_pool=True, long_deadline=True, keeps_prf=True,
                                             llm_variants=False),
})
DEFAULT_EFFORT = common_pb2.EFFORT_BALANCED


def why_not_expand(effort: int, requested: bool | None, prf_in_balanced: bool) -> str | None:
    """Whether a query is expanded, decided once for the gateway (does it call the expansion service) and
    the service (does it generate): None to expand, else the reason it is not. The caller's word decides
    (`requested`: SearchRequest.expand, ExpandRequest.force), else the effort's row; a row that expands with
    PRF only if configured (BALANCED) asks expansion.prf_in_balanced. Strong signals in the query itself
    (expansion.skip) are the service's to find: they need the query's own BM25 probe."""
    if requested is not None:
        return None if requested else "request"
    policy = effort_policy(effort)
    if not policy.expands:
        return f"{policy.name} effort"
    if policy.prf_only_if_configured and not prf_in_balanced:
        return f"feedback expansion is off in {policy.name.upper()} (expansion.prf_in_balanced)"
    return None


def effort_policy(effort: int) -> EffortPolicy:
    """The row of `effort`; UNSPECIFIED is the default (BALANCED). Callers validate unknown values first."""
    return EFFORTS[effort or DEFAULT_EFFORT]
