"""SearchService: one query's whole path, top to bottom. Each stage is its own module, takes what it
needs and returns what it made; what the search reports about itself (leg states, timings, notices) is
its Report (gateway.query.report), the lists it works on and their texts its Pool (gateway.query.pool).
From retrieve on, the stages run in gateway.query.path (QueryPath: no gRPC of its own).

  plan      gateway.query.request       the request validated into a SearchPlan (INVALID_ARGUMENT otherwise)
  locate    gateway.query.locate        the plan sealed, a first page's collections the stores hold (NOT_FOUND when
                                        none does, a notice for each missing one of several), each read from its
                                        store name (an alias's serving generation)
  admit     gateway.access.admission    a slot under the gateway's in-flight bound (RESOURCE_EXHAUSTED otherwise)
  retrieve  gateway.query.retrieve      every leg the plan uses || expansion, then its variants
                                        (gateway.query.legs.runner)
  fuse      gateway.query.fuse          every list fused (in the gateway if the fusion service is down), boosted
  graph     gateway.query.graph         link expansion: the top documents' neighbours, fused once more
  rerank    gateway.query.rerank        the head on Triton, blended by position (gateway.query.rerank_policy decides)
  respond   gateway.query.respond       final boosts, calibrated scores, the page's previews, explain, context;
                                        paging keeps the order for later pages (gateway.query.paging, .next_page)

With several collections (gateway.query.fanout) retrieve, fuse and graph run per collection, concurrently, and
their fused lists are merged once before the one rerank. A leg that fails or is cut as a straggler is
reported and the answer marked degraded; only when no retrieval leg answered does the search fail
(UNAVAILABLE)."""

from __future__ import annotations

import asyncio
import time

import grpc

from hybridsearch.runtime import metrics
from hybridsearch.config.settings import Settings
from hybridsearch.query.effort import effort_policy
from hybridsearch.security.sealing import Sealer
from hybridsearch.contract.errors import Refusal, abort_invalid
from hybridsearch.gateway.access.admission import Admission, Overloaded
from hybridsearch.gateway.backends import Backends
from hybridsearch.gateway.resources.catalog import Catalog
from hybridsearch.gateway.query.deadline import Deadline
from hybridsearch.gateway.query.locate import locate
from hybridsearch.gateway.query.next_page import next_page
from hybridsearch.gateway.query.observed import TRACER
from hybridsearch.gateway.query.paging import Pager
from hybridsearch.gateway.query.path import QueryPath
from hybridsearch.gateway.query.report import FAILED, Report
from hybridsearch.gateway.query.request import plan_search
from hybridsearch.v1 import common_pb2, search_pb2, search_pb2_grpc


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
            plan = plan_search(request, self.settings)
            plan, notices = await locate(plan, request, self.settings, self.sealer, self.catalog)
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
                    if plan.page_token:  # a later page: read from the first page's kept order
                        response = await next_page(request, plan, self.pager, self.path.texts,
                                                   self.path.responder.analyzer, deadline)
                    elif (answer := await self.path.answer(plan, deadline, report)) is not None:
                        response = answer.response
                        response.notices.extend(notices)  # before the order is kept: later pages carry them too
                        self.pager.keep(request, plan.requested, response, answer.order, answer.candidates, plan.offset + plan.top_k,
                                        sent=_on_done(context), readers=plan.readers_key)
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


def _on_done(context: grpc.aio.ServicerContext) -> asyncio.Future:
    """A future done once the RPC has finished (its answer sent), whichever thread gRPC tells it on."""
    loop = asyncio.get_running_loop()
    done = loop.create_future()

    def finished(_context) -> None:
        loop.call_soon_threadsafe(lambda: done.done() or done.set_result(None))

    context.add_done_callback(finished)
    return done
