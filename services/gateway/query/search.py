"""SearchService: one query's whole path, top to bottom. Each stage is its own module, takes what it
needs and returns what it made; what the search reports about itself (leg states, timings, notices) is
its Report (gateway.query.report), the lists it works on and their texts its Pool (gateway.query.pool).

  plan      gateway.query.request       the request validated into a SearchPlan (INVALID_ARGUMENT otherwise)
  exist     gateway.resources.catalog   a first page's collections the stores hold: NOT_FOUND when none does, a
                                        notice for each missing one of several (the answer is from the others)
  admit     gateway.access.admission    a slot under the gateway's in-flight bound (RESOURCE_EXHAUSTED otherwise)
  retrieve  gateway.query.retrieve      every leg the plan uses || expansion, then its variants
                                        (gateway.query.legs.runner)
  fuse      gateway.query.fuse          every list fused (in the gateway if the fusion service is down), boosted
  graph     gateway.query.graph         link expansion: the top documents' neighbours, fused once more
  rerank    gateway.query.rerank        the head on Triton, blended by position (gateway.query.rerank_policy decides)
  respond   gateway.query.respond       final boosts, calibrated scores, the page's previews, explain; paging keeps
                                        the order for later pages (gateway.query.paging, gateway.query.next_page)

With several collections (gateway.query.fanout) retrieve, fuse and graph run per collection, concurrently, and
their fused lists are merged once before the one rerank. A leg that fails or is cut as a straggler is
reported and the answer marked degraded; only when no retrieval leg answered does the search fail
(UNAVAILABLE).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace

import grpc

from hybridsearch.runtime import metrics
from hybridsearch.config.settings import Settings
from hybridsearch.query.effort import effort_policy
from hybridsearch.security.hashed_terms import HashedTerms
from hybridsearch.security.sealing import Sealer
from hybridsearch.contract.validation import Refusal, abort_invalid
from hybridsearch.gateway.access.admission import Admission, Overloaded
from hybridsearch.gateway.backends import Backends
from hybridsearch.gateway.breakers import Breakers
from hybridsearch.gateway.resources.catalog import Catalog, narrowed
from hybridsearch.gateway.query.deadline import Deadline
from hybridsearch.gateway.query.expander import Expander
from hybridsearch.gateway.query.fanout import fan_out
from hybridsearch.gateway.query.fuse import Fuser
from hybridsearch.gateway.query.graph import neighbours
from hybridsearch.gateway.query.legs.protocol import LegSettings
from hybridsearch.gateway.query.legs.runner import LegRunner
from hybridsearch.gateway.query.next_page import next_page
from hybridsearch.gateway.query.observed import TRACER
from hybridsearch.gateway.query.paging import Pager
from hybridsearch.gateway.query.pool import Pool
from hybridsearch.gateway.query.report import FAILED, Report
from hybridsearch.gateway.query.request import SearchPlan, plan_search
from hybridsearch.gateway.query.rerank import Reranker
from hybridsearch.gateway.query.respond import Answer, Responder
from hybridsearch.gateway.query.retrieve import retrieve
from hybridsearch.gateway.query.sealed import seal_plan
from hybridsearch.gateway.query.texts import StoredTexts
from hybridsearch.v1 import common_pb2, fusion_pb2, search_pb2, search_pb2_grpc


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
                         report: Report) -> tuple[list[fusion_pb2.FusedHit], Pool] | None:
        """One collection's fused list and the pool it was fused from (None: none of its legs answered)."""
        for notice in plan.notices:
            report.notice(notice)
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


class SearchServicer(search_pb2_grpc.SearchServiceServicer):
    def __init__(self, settings: Settings, backends: Backends, catalog: Catalog) -> None:
        self.settings = settings
        self.catalog = catalog
        cfg = settings.admission
        self.admission = Admission(cfg.max_in_flight, cfg.max_queue, cfg.max_wait_s)
        self.path = QueryPath(settings, backends)
        self.pager = Pager(settings.paging, settings.redis)
        self.sealer = Sealer(settings)
        metrics.initialise(metrics.DEGRADED_LEGS, "leg", metrics.DEGRADABLE_LEGS)

    def _gauge_admission(self) -> None:
        metrics.IN_FLIGHT.set(self.admission.in_flight)
        metrics.QUEUED.set(self.admission.queued)

    async def Search(self, request: search_pb2.SearchRequest,
                     context: grpc.aio.ServicerContext) -> search_pb2.SearchResponse:
        try:
            # A sealed collection without its key is FAILED_PRECONDITION whether or not a store holds it yet.
            plan = seal_plan(plan_search(request, self.settings), self.sealer)
            plan, notices = await self._existing(request, plan)
            plan = await self._resolve(plan)
        except Refusal as err:  # InvalidArgument, NOT_FOUND; SealingError: a sealed collection without its key
            await abort_invalid(context, err)
        effort = common_pb2.Effort.Name(plan.effort)
        budget = effort_policy(plan.effort).deadline_s(self.settings.query.search_deadline_s,
                                                       self.settings.query.thorough_deadline_s)
        deadline = Deadline(min(budget, context.time_remaining() or budget))
        report = Report()
        response = None
        try:
            async with self.admission.slot(deadline.left(), effort) as waited:
                self._gauge_admission()
                report.note("queue", waited * 1000)
                with TRACER.start_as_current_span("gateway.search") as span:
                    span.set_attribute("search.collection", plan.collection)
                    span.set_attribute("search.collections", [p.collection for p in plan.parts])
                    span.set_attribute("search.mode", common_pb2.RetrievalMode.Name(plan.mode))
                    span.set_attribute("search.effort", effort)
                    response = await self._page(request, plan, deadline, report, context, notices)
                    span.set_attribute("search.degraded", response is None or response.degraded)
        except Refusal as err:  # InvalidArgument included
            await abort_invalid(context, err)
        except Overloaded as err:
            metrics.REJECTED.labels(reason=err.reason).inc()
            metrics.SEARCHES.labels(effort=effort, outcome="rejected").inc()
            await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED,
                                f"gateway at capacity ({err}); retry with backoff or another replica")
        finally:
            self._gauge_admission()
        metrics.STAGE_DURATION.labels(stage="total").observe(time.perf_counter() - report.started)
        outcome = "unavailable" if response is None else "degraded" if response.degraded else "ok"
        metrics.SEARCHES.labels(effort=effort, outcome=outcome).inc()
        for status in report.failed_legs():
            metrics.DEGRADED_LEGS.labels(leg=status.name.partition("@")[0]).inc()  # "bm25@notes": the leg's label
        if response is None:
            reasons = "; ".join(f"{s.name}: {s.reason}" for s in report.legs.values() if s.state == FAILED)
            await context.abort(grpc.StatusCode.UNAVAILABLE, f"no retrieval leg answered ({reasons})")
        return response

    async def _existing(self, request: search_pb2.SearchRequest, plan: SearchPlan) -> tuple[SearchPlan, list[str]]:
        """The plan without the collections no store holds, and a notice for each (a first page only: a
        later page reads its first page's order)."""
        if plan.page_token:
            return plan, []
        searched = [c for c, _ in plan.configs]
        if not (missing := await self.catalog.missing(searched)):
            return plan, []
        narrow, notices = narrowed(request, searched, missing)
        return seal_plan(plan_search(narrow, self.settings), self.sealer), notices

    async def _resolve(self, plan: SearchPlan) -> SearchPlan:
        """The plan with each collection's store name: an alias's serving generation (gateway/resources/aliases.py)."""
        stored = await self.catalog.stored(c for c, _ in plan.configs)
        parts = tuple(replace(part, stored=stored.get(part.collection, "")) for part in plan.parts)
        return replace(plan, parts=parts, stored=stored.get(plan.collection, ""))

    async def _page(self, request: search_pb2.SearchRequest, plan: SearchPlan, deadline: Deadline, report: Report,
                    context: grpc.aio.ServicerContext, notices: list[str]) -> search_pb2.SearchResponse | None:
        if plan.page_token:
            return await next_page(request, plan, self.pager, self.path.texts, self.path.responder.analyzer, deadline)
        answer = await self.path.answer(plan, deadline, report)
        if answer is None:
            return None
        answer.response.notices.extend(notices)  # before the order is kept: later pages carry them too
        self.pager.keep(request, answer.response, answer.order, answer.candidates, plan.offset + plan.top_k,
                        sent=_on_done(context))
        return answer.response


def _on_done(context: grpc.aio.ServicerContext) -> asyncio.Future:
    """A future done once the RPC has finished (its answer sent), whichever thread gRPC tells it on."""
    loop = asyncio.get_running_loop()
    done = loop.create_future()

    def finished(_context) -> None:
        loop.call_soon_threadsafe(lambda: done.done() or done.set_result(None))

    context.add_done_callback(finished)
    return done
