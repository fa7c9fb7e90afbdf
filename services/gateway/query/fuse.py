"""The fusion stage: every ranked list fused (the fusion service; in the gateway when it cannot answer),
then the collection's metadata boosts on the fused scores (gateway.query.boosts)."""

from __future__ import annotations

from hybridsearch.runtime import metrics
from hybridsearch.contract.errors import InvalidArgument
from hybridsearch.config.search import QuerySettings, ResilienceSettings
from hybridsearch.fusion.packed import FusedDoc, fused_docs, unpack_fused
from hybridsearch.fusion.params import params_to_proto
from hybridsearch.fusion.service import fuse_lists
from hybridsearch.gateway.backends import Backends
from hybridsearch.gateway.query.boosts import boost_fused
from hybridsearch.gateway.breakers import Breakers
from hybridsearch.gateway.query.deadline import CALL_ERRORS, Deadline, reason
from hybridsearch.gateway.query.observed import TRACER
from hybridsearch.gateway.query.pool import Pool
from hybridsearch.gateway.query.report import Report
from hybridsearch.gateway.query.request import SearchPlan
from hybridsearch.v1 import common_pb2, fusion_pb2

NAME = "fusion"


class Fuser:
    def __init__(self, cfg: QuerySettings, resilience: ResilienceSettings, backends: Backends, breakers: Breakers,
                 in_gateway: bool = False) -> None:
        self.cfg, self.resilience, self.backends, self.breaker = cfg, resilience, backends, breakers.of(NAME)
        self.in_gateway = in_gateway  # topology.in_gateway names fusion: every answer fused here, no hop

    async def fuse(self, plan: SearchPlan, pool: Pool, deadline: Deadline, report: Report) -> list[FusedDoc]:
        """The pool's lists fused, boosted; the boosts that applied are reported (explain)."""
        fused = await self._fused(plan, pool.lists, deadline, report)
        fused, report.boosts = boost_fused(fused, lambda chunk_id: pool.hit(chunk_id).metadata, plan.config.boosts,
                                           plan.collection)
        return fused

    async def _fused(self, plan: SearchPlan, lists: list[common_pb2.RankedList], deadline: Deadline,
                     report: Report) -> list[FusedDoc]:
        limit = self.cfg.fusion_depth
        # One ranked list (the default's only case): fusion would only collapse chunks and scale scores, which the
        # same library does here in microseconds; a hop would cost more than the answer. More lists where the
        # operator says so (QuerySettings.fuse_in_gateway_lists: the hop's CPU measured); every answer where fusion
        # runs inside the gateway (TopologySettings.in_gateway: the same library).
        here = self.in_gateway or len(lists) <= self.cfg.fuse_in_gateway_lists
        config = params_to_proto(plan.fusion) if plan.explain or not here else None  # what applies, as a message
        if not here:
            request = fusion_pb2.FuseRequest(lists=[ranks_only(rl) for rl in lists], config=config, limit=limit,
                                             omit_text=True, packed=True)
            try:
                with TRACER.start_as_current_span("gateway.fusion"):
                    async with self.breaker.guard():
                        timeout = min(deadline.left(), self.resilience.fusion_timeout_s)
                        response = await self.backends.fusion.Fuse(request, timeout=timeout)
                        report.fusion_applied = response.config
                        # a service from before FuseRequest.packed answers FusedHits (read as they are)
                        return unpack_fused(response.packed) if not response.hits else list(response.hits)
            except (*CALL_ERRORS, InvalidArgument) as err:  # InvalidArgument: an answer whose columns do not line up
                # Fusion is a pure function: the gateway can do it itself rather than fail the search.
                report.notices.append(f"fusion service unavailable ({reason(err)}): fused in the gateway")
                report.fused_in_gateway = True
                metrics.DEGRADED_LEGS.labels(leg=NAME).inc()
        report.fusion_applied = config  # for explain (None unless asked)
        return fused_docs(fuse_lists(lists, plan.fusion, limit))


def ranks_only(ranked: common_pb2.RankedList) -> common_pb2.RankedList:
    """The list as fusion reads it: without the titles and texts, which the gateway keeps (BALANCED's lists
    once carried ~1 MB of passages: 7 ms of the hop on SciFact). Copied whole and cleared where a text is (the
    head: legs send texts down to the search's text depth only), not rebuilt hit by hit (4x the CPU)."""
    out = common_pb2.RankedList()
    out.CopyFrom(ranked)
    for hit in out.hits:
        if not (hit.text or hit.title or hit.HasField("sealed")):
            break  # below the text depth every hit comes without
        hit.ClearField("title")
        hit.ClearField("text")
        hit.ClearField("sealed")
    return out
