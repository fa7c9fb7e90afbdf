"""The query path's stages in order over the parts they call, one collection's and then the answer's: no gRPC
server of its own (gateway.query.search serves it; unit-tested over in-process stand-ins, tests/query_standins.py)."""

from __future__ import annotations

import time

from hybridsearch.config.settings import Settings
from hybridsearch.security.hashed_terms import HashedTerms
from hybridsearch.security.sealing import Sealer
from hybridsearch.gateway.backends import Backends
from hybridsearch.gateway.breakers import Breakers
from hybridsearch.gateway.query.deadline import Deadline
from hybridsearch.gateway.query.expander import Expander
from hybridsearch.gateway.query.fanout import fan_out
from hybridsearch.gateway.query.fuse import Fuser
from hybridsearch.gateway.query.graph import neighbours
from hybridsearch.gateway.query.legs.protocol import LegSettings
from hybridsearch.gateway.query.legs.runner import LegRunner
from hybridsearch.gateway.query.pool import Pool
from hybridsearch.gateway.query.report import Report
from hybridsearch.gateway.query.request import SearchPlan
from hybridsearch.gateway.query.rerank import Reranker
from hybridsearch.gateway.query.respond import Answer, Responder
from hybridsearch.gateway.query.retrieve import retrieve
from hybridsearch.gateway.query.texts import StoredTexts
from hybridsearch.fusion.packed import FusedDoc


class QueryPath:
    """The stages in order, over the parts they call (no gRPC server of its own: unit-tested with fakes)."""

    def __init__(self, settings: Settings, backends: Backends) -> None:
        resilience = settings.resilience
        self.settings = settings
        self.breakers = Breakers(resilience.breaker_threshold, resilience.breaker_reset_s)
        # each stage gets its own sections of the settings, not the whole (the plan alone reads the deployment's
        # collections and defaults: gateway/query/request.py)
        query, rerank = settings.query, settings.rerank
        legs = LegSettings(vector=settings.vector, hashed_terms=HashedTerms(settings.bm25))
        self.runner = LegRunner(query, resilience, rerank, legs, backends, self.breakers)
        self.expander = Expander(query, backends, self.breakers)
        self.fuser = Fuser(query, resilience, backends, self.breakers, "fusion" in settings.topology.in_gateway)
        self.texts = StoredTexts(query, rerank, Sealer(settings), backends)
        self.reranker = Reranker(rerank, backends, self.breakers, self.texts)
        self.responder = Responder(rerank, settings.bm25, self.texts)

    async def answer(self, plan: SearchPlan, deadline: Deadline, report: Report) -> Answer | None:
        """The first page of an answer, or None when no retrieval leg answered."""
        if plan.parts:  # several collections: each retrieves and fuses on its own, then one merged list
            found = await fan_out(plan, lambda part, part_report: self.collection(part, deadline, part_report),
                                  report, self.settings.query.fusion_depth)
        else:
            found = await self.collection(plan, deadline, report)
        if found is None:
            return None
        fused, pool = found
        t = time.perf_counter()
        reranked = await self.reranker.rerank(plan, fused, pool, deadline, report)
        report.timed("rerank", t)
        return await self.responder.respond(plan, fused, reranked, pool, deadline, report)

    async def collection(self, plan: SearchPlan, deadline: Deadline,
                         report: Report) -> tuple[list[FusedDoc], Pool] | None:
        """One collection's fused list and the pool it was fused from (None: none of its legs answered)."""
        report.notices += plan.notices
        lists = await retrieve(plan, deadline, self.runner, self.expander, report, self.settings.query.variant_batch_wait_s)
        if lists is None:
            return None
        pool = Pool()
        pool.add(lists)
        t = time.perf_counter()
        fused = await self.fuser.fuse(plan, pool, deadline, report)
        report.timed("fusion", t)
        t = time.perf_counter()
        if (graph := await neighbours(plan, fused, self.settings.graph, self.runner, deadline, report)) is not None:
            pool.add([graph])  # link expansion's list joins the others, fused once more
            fused = await self.fuser.fuse(plan, pool, deadline, report)
        if plan.graph:
            report.timed("graph", t)
        return fused, pool
