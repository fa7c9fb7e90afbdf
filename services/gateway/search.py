"""SearchService: one query's whole path, top to bottom.

  1. validate the request into a SearchPlan
  2. fan out under one deadline: every leg of the registry (gateway.legs) the plan uses || expansion
  3. run the variant queries through the legs that take their kind
  4. fuse every ranked list (fusion service; in-process if it is down); with link expansion
     (gateway.graph) the top documents' neighbours join as one more list and fusion runs again
  5. rerank the head of the fused list on Triton and blend by position
  6. the collection's metadata boosts (gateway.boosts) on the fused scores before the rerank pool is cut,
     and on the final scores after rerank
  7. calibrate the scores (gateway.calibration: comparable across queries, the order unchanged), page,
     apply min_score to the calibrated scores, explain

With several collections (gateway.fanout) stages 2-4 run per collection, concurrently, and their fused
lists are fused and deduplicated once more before the one rerank.

A leg that fails or times out is reported in `legs` and the answer is marked degraded; only when
no retrieval leg answered at all does the search fail (UNAVAILABLE).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field

import grpc

from hybridsearch.bm25.analyzer import EnglishAnalyzer
from hybridsearch.common import metrics
from hybridsearch.common.config import Settings
from hybridsearch.common.effort import effort_policy
from hybridsearch.common.telemetry import tracer
from hybridsearch.common.validation import InvalidArgument, Refusal, abort_invalid
from hybridsearch.fusion.params import params_to_proto
from hybridsearch.fusion.service import fuse_proto
from hybridsearch.gateway.admission import Admission, Overloaded
from hybridsearch.gateway.backends import Backends
from hybridsearch.gateway.boosts import FUSION, RERANK, boost_final, boost_fused, capped, factors
from hybridsearch.gateway.breakers import Breakers, CircuitOpen
from hybridsearch.gateway.calibration import Scale, non_increasing, own_score, scale_of
from hybridsearch.gateway.fanout import fan_out, split_key
from hybridsearch.gateway.graph import expand as expand_graph
from hybridsearch.gateway.legs.protocol import RetrievalLeg
from hybridsearch.gateway.legs.registry import LEGS
from hybridsearch.gateway.paging import Pager
from hybridsearch.gateway.previews import counts_line, show, tag_distribution
from hybridsearch.gateway.request import SearchPlan, plan_search
from hybridsearch.gateway.rerank_policy import ModelInfo, decide_rerank, needs_model
from hybridsearch.gateway.texts import text_depth
from hybridsearch.reranker.blend import blend, fusion_weight
from hybridsearch.v1 import common_pb2, expansion_pb2, fusion_pb2, search_pb2, search_pb2_grpc

log = logging.getLogger(__name__)
OK, SKIPPED, FAILED = search_pb2.LEG_STATE_OK, search_pb2.LEG_STATE_SKIPPED, search_pb2.LEG_STATE_FAILED
FALLBACK = search_pb2.LEG_STATE_FALLBACK


@dataclass
class Trace:
    """What one search collected on its way: leg states, timings, lists, expansion."""

    started: float = field(default_factory=time.perf_counter)
    legs: dict[str, search_pb2.LegStatus] = field(default_factory=dict)
    timings: list[search_pb2.StageTiming] = field(default_factory=list)
    lists: list[common_pb2.RankedList] = field(default_factory=list)
    part_lists: dict[str, list[common_pb2.RankedList]] = field(default_factory=dict)  # several collections: each one's
    expansion: expansion_pb2.ExpandResponse | None = None
    notices: list[str] = field(default_factory=list)
    reranker_model: str = ""
    fusion_applied: fusion_pb2.FusionConfig | None = None  # what the fusion service says it applied
    boosts: list[search_pb2.AppliedBoost] = field(default_factory=list)  # metadata boosts that applied
    degraded: bool = False
    # The final order for later pages: order(n) builds its first n hits (paging.Pager, after the answer).
    order: Callable[[int], list[search_pb2.SearchHit]] = lambda n: []
    candidates: int = 0
    lookup: Callable[[str], common_pb2.LegHit] | None = None  # several collections: the merged keys' hits
    _hits: dict[str, common_pb2.LegHit] | None = None
    _indexed: int = 0  # lists in _hits (a list added later, the graph's, is indexed on the next lookup)

    def hit(self, chunk_id: str) -> common_pb2.LegHit:
        """The leg hit (title, text) of a chunk: fused hits travel without text, the gateway holds it."""
        if self.lookup is not None:
            return self.lookup(chunk_id)
        if self._hits is None or self._indexed < len(self.lists):
            self._hits = self._hits or {}
            for rl in self.lists[self._indexed:]:
                for h in rl.hits:  # the first that came with its text (gateway.texts: lists trim theirs)
                    known = self._hits.get(h.chunk_id)
                    if known is None or (h.text and not known.text):
                        self._hits[h.chunk_id] = h
            self._indexed = len(self.lists)
        return self._hits.get(chunk_id) or common_pb2.LegHit()

    def leg(self, name: str, state: int, reason: str = "") -> None:
        self.legs[name] = search_pb2.LegStatus(name=name, state=state, reason=reason)
        if state in (FAILED, FALLBACK):
            self.degraded = True

    def note(self, stage: str, ms: float) -> None:
        """A timing for explain only (the legs' own latency metrics are LEG_DURATION)."""
        self.timings.append(search_pb2.StageTiming(stage=stage, ms=ms))

    def timed(self, stage: str, since: float) -> None:
        seconds = time.perf_counter() - since
        self.timings.append(search_pb2.StageTiming(stage=stage, ms=seconds * 1000))
        metrics.STAGE_DURATION.labels(stage=stage).observe(seconds)


@dataclass
class Reranked:
    """Fused indexes in final order; rerank and blended scores for the reranked head."""

    order: list[int]
    rerank: dict[int, float] = field(default_factory=dict)
    final: dict[int, float] = field(default_factory=dict)

    def final_scores(self, fused: list[fusion_pb2.FusedHit]) -> dict[int, float]:
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


class Deadline:
    def __init__(self, seconds: float) -> None:
        self.end = time.monotonic() + seconds

    def left(self) -> float:
        return max(0.01, self.end - time.monotonic())


class Straggler(asyncio.TimeoutError):
    """A retrieval leg that had not answered long after the other one did."""


class Stragglers:
    """One search's cut-off for a late retrieval leg: armed by the first leg that answers."""

    def __init__(self, grace_s: float, factor: float) -> None:
        self.grace_s, self.factor = grace_s, factor
        self.started = time.perf_counter()
        self.first = asyncio.Event()
        self.first_s = 0.0
        self.cutoff = asyncio.ensure_future(self._cutoff())

    def answered(self) -> None:
        if not self.first.is_set():
            self.first_s = time.perf_counter() - self.started
            self.first.set()

    async def _cutoff(self) -> float:
        await self.first.wait()
        grace = max(self.grace_s, self.factor * self.first_s)
        await asyncio.sleep(grace)
        return grace

    async def call(self, call):
        """The call's answer, unless the cut-off comes first: then the call is cancelled and Straggler raised."""
        task = asyncio.ensure_future(call)
        done, _ = await asyncio.wait({task, self.cutoff}, return_when=asyncio.FIRST_COMPLETED)
        if task in done:
            return task.result()
        task.cancel()
        raise Straggler(f"late: no answer {self.cutoff.result():.2f}s after the other leg answered")

    def close(self) -> None:
        self.cutoff.cancel()


# What a call to a part can fail with: an RPC error, its own budget running out, or its open breaker.
CALL_ERRORS = (grpc.aio.AioRpcError, asyncio.TimeoutError, CircuitOpen)


def _reason(err: BaseException) -> str:
    if isinstance(err, (CircuitOpen, Straggler)):
        return str(err)
    if isinstance(err, grpc.aio.AioRpcError):
        return f"{err.code().name}: {err.details()}"
    if isinstance(err, asyncio.TimeoutError):
        return "deadline exceeded"
    return f"{type(err).__name__}: {err}"


class SearchServicer(search_pb2_grpc.SearchServiceServicer):
    def __init__(self, settings: Settings, backends: Backends) -> None:
        self.settings = settings
        self.backends = backends
        self.tracer = tracer(__name__)
        cfg = settings.admission
        self.admission = Admission(cfg.max_in_flight, cfg.max_queue, cfg.max_wait_s)
        self.resilience = settings.resilience
        self.breakers = Breakers(self.resilience.breaker_threshold, self.resilience.breaker_reset_s)
        # Highlights match the query's terms as BM25 analyses them (stemmed, without stopwords).
        self.analyzer = EnglishAnalyzer(settings.bm25.stemmer, settings.bm25.stopwords)
        self.pager = Pager(settings)
        metrics.initialise(metrics.DEGRADED_LEGS, "leg", metrics.DEGRADABLE_LEGS)
        metrics.initialise(metrics.REJECTED, "reason", ("queue_full", "wait"))

    def _gauge_admission(self) -> None:
        metrics.IN_FLIGHT.set(self.admission.in_flight)
        metrics.QUEUED.set(self.admission.queued)

    @contextmanager
    def _observed(self, leg: str):
        """One call the gateway makes: a span `gateway.<leg>` and its latency in LEG_DURATION."""
        with self.tracer.start_as_current_span(f"gateway.{leg}") as span, metrics.LEG_DURATION.labels(leg=leg).time():
            yield span

    async def Search(self, request: search_pb2.SearchRequest, context) -> search_pb2.SearchResponse:
        try:
            plan = plan_search(request, self.settings)
        except InvalidArgument as err:
            await abort_invalid(context, err)
        budget = effort_policy(plan.effort).deadline_s(self.settings.search_deadline_s,
                                                       self.settings.thorough_deadline_s)
        remaining = context.time_remaining()
        deadline = Deadline(min(budget, remaining or budget))
        trace = Trace()
        try:
            async with self.admission.slot(deadline.left()) as waited:
                self._gauge_admission()
                trace.note("queue", waited * 1000)
                with self.tracer.start_as_current_span("gateway.search") as span:
                    span.set_attribute("search.collection", plan.collection)
                    span.set_attribute("search.collections", [p.collection for p in plan.parts])
                    span.set_attribute("search.mode", common_pb2.RetrievalMode.Name(plan.mode))
                    span.set_attribute("search.effort", common_pb2.Effort.Name(plan.effort))
                    if plan.page_token:
                        response = await self._next_page(request, plan, deadline)
                    else:
                        response = await self._search(plan, deadline, trace)
                        if response is not None:
                            self.pager.keep(request, response, trace.order, trace.candidates, plan.offset + plan.top_k,
                                            sent=_on_done(context))
                    span.set_attribute("search.degraded", response is None or response.degraded)
        except Refusal as err:  # InvalidArgument included
            await abort_invalid(context, err)
        except Overloaded as err:
            metrics.REJECTED.labels(reason=err.reason).inc()
            metrics.SEARCHES.labels(effort=common_pb2.Effort.Name(plan.effort), outcome="rejected").inc()
            await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED,
                                f"gateway at capacity ({err}); retry with backoff or another replica")
        finally:
            self._gauge_admission()
        metrics.STAGE_DURATION.labels(stage="total").observe(time.perf_counter() - trace.started)
        outcome = "unavailable" if response is None else "degraded" if response.degraded else "ok"
        metrics.SEARCHES.labels(effort=common_pb2.Effort.Name(plan.effort), outcome=outcome).inc()
        for leg in (name for name, s in trace.legs.items() if s.state in (FAILED, FALLBACK)):
            metrics.DEGRADED_LEGS.labels(leg=leg.partition("@")[0]).inc()  # "bm25@notes": the leg's label
        if response is None:
            reasons = "; ".join(f"{s.name}: {s.reason}" for s in trace.legs.values() if s.state == FAILED)
            await context.abort(grpc.StatusCode.UNAVAILABLE, f"no retrieval leg answered ({reasons})")
        return response

    async def _search(self, plan: SearchPlan, deadline: Deadline, trace: Trace) -> search_pb2.SearchResponse | None:
        if plan.parts:  # several collections: each retrieves and fuses on its own, then one merged list
            fused = await fan_out(plan, trace, lambda part, part_trace: self._retrieve(part, deadline, part_trace),
                                  self.settings.fusion_depth)
        else:
            fused = await self._retrieve(plan, deadline, trace)
        if fused is None:
            return None

        # Stage 4: rerank the head, blend by position.
        t = time.perf_counter()
        reranked = await self._rerank(plan, fused, deadline, trace)
        trace.timed("rerank", t)

        # Stage 5: page and build the answer.
        return await self._respond(plan, fused, reranked, deadline, trace)

    async def _retrieve(self, plan: SearchPlan, deadline: Deadline,
                        trace: Trace) -> list[fusion_pb2.FusedHit] | None:
        """Stages 1-3 for one collection: its fused list, or None when none of its legs answered."""
        depth = self.settings.leg_depth
        originals = [common_pb2.LegQuery(text=plan.query, kind=common_pb2.QUERY_KIND_ORIGINAL)]
        used = [leg for leg in LEGS.values() if leg.used_by(plan)]

        # Stage 1: every leg the plan uses and expansion at once; stage 2, the variants, as soon as expansion
        # has answered (not after the original legs: the two query embeddings then share the cores).
        t = time.perf_counter()
        stragglers = (Stragglers(self.resilience.straggler_grace_s, self.resilience.straggler_factor)
                      if len(used) > 1 else None)
        calls = [self._leg(leg, plan, originals, depth, deadline, trace, stragglers=stragglers) for leg in used]
        try:
            await asyncio.gather(*calls, self._expand_and_vary(plan, used, depth, deadline, trace, stragglers))
        finally:
            if stragglers is not None:
                stragglers.close()
        trace.timed("retrieve+expand", t)
        for leg in LEGS.values():
            if leg not in used:
                trace.leg(leg.name, SKIPPED, leg.off)

        if not any(trace.legs[leg.name].state == OK for leg in LEGS.values()):
            return None

        # Stage 3: fusion.
        t = time.perf_counter()
        fused = await self._fused(plan, deadline, trace)
        trace.timed("fusion", t)
        # Link expansion (gateway.graph): the top documents' neighbours join, fused a second time.
        return await expand_graph(plan, fused, self.settings, trace,
                                  lambda leg: self._leg(leg, plan, originals, depth, deadline, trace),
                                  lambda: self._fused(plan, deadline, trace))

    async def _expand_and_vary(self, plan: SearchPlan, used: list[RetrievalLeg], depth: int, deadline: Deadline,
                               trace: Trace, stragglers: Stragglers | None) -> None:
        """Expansion, then its variant queries through the legs they were written for: every leg whose
        original query has not failed (it may still be running), under the same straggler cut-off."""
        await self._expand(plan, deadline, trace)
        variants = _variant_queries(trace.expansion)
        calls = []
        for leg in used:
            queries = [q for q in variants if q.kind in leg.kinds]
            status = trace.legs.get(leg.name)
            if queries and (status is None or status.state == OK):
                calls.append(self._leg(leg, plan, queries, depth, deadline, trace, variants=True, stragglers=stragglers))
        if calls:
            t = time.perf_counter()
            await asyncio.gather(*calls)
            trace.timed("variants", t)

    async def _leg(self, leg: RetrievalLeg, plan, queries, depth, deadline, trace, *, variants=False, stragglers=None):
        base = common_pb2.LegSearchRequest(collection=plan.collection, queries=queries, limit=depth, filters=plan.filters,
                                           metadata_fields=plan.metadata_fields, text_depth=text_depth(plan, self.settings))
        request = leg.request(base, plan, self.settings)
        name = leg.name
        stage = f"{name}{'.variants' if variants else ''}"
        called = time.perf_counter()
        with self._observed(stage):
            try:
                async with self.breakers.guard(leg.part):
                    call = leg.call(self.backends, request, min(deadline.left(), self.resilience.leg_timeout_s))
                    response = await (stragglers.call(call) if stragglers is not None else call)
            except CALL_ERRORS as err:
                if isinstance(err, grpc.aio.AioRpcError) and err.code() == grpc.StatusCode.INVALID_ARGUMENT:
                    # The request, not the leg, is at fault: the caller hears it, it is no degraded answer.
                    raise InvalidArgument(f"{name}: {err.details()}") from err
                if variants:
                    trace.notices.append(f"{name} variant queries failed: {_reason(err)}")
                else:
                    trace.leg(name, FAILED, _reason(err))
                    log.warning("%s leg failed: %s", name, _reason(err))
                return
        if stragglers is not None:
            stragglers.answered()
        # The call as the gateway saw it, then the service's own parts: the difference is the hop.
        took = time.perf_counter() - called
        trace.note(f"leg.{stage}", took * 1000)
        for part, ms in sorted(response.timings_ms.items()):
            trace.note(f"leg.{stage}.{part}", ms)
        weights = {
            common_pb2.QUERY_KIND_LEXICAL_VARIANT: plan.fusion.variant_weight,
            common_pb2.QUERY_KIND_SEMANTIC_VARIANT: plan.fusion.variant_weight,
            common_pb2.QUERY_KIND_HYDE: plan.fusion.hyde_weight,
            common_pb2.QUERY_KIND_FEEDBACK: plan.fusion.feedback_weight,
        }
        for rl in response.lists:
            rl.weight = weights.get(rl.kind, 1.0)
            trace.lists.append(rl)
        if not variants:
            late = f"; late: {took * 1000:.0f} ms" if took > self.resilience.leg_late_s else ""
            trace.leg(name, OK, response.engine + late)

    async def _expand(self, plan, deadline, trace):
        if not plan.expands:
            trace.leg("expansion", SKIPPED, "request" if plan.expand is False else f"{effort_policy(plan.effort).name} effort")
            return
        with self._observed("expansion"):
            try:
                async with self.breakers.guard("expansion"):
                    trace.expansion = await self.backends.expansion.Expand(
                        expansion_pb2.ExpandRequest(query=plan.query, collection=plan.collection, effort=plan.effort,
                                                    filters=plan.filters, force=plan.expand is True,
                                                    language=plan.language, fuzzy=plan.fuzzy),
                        timeout=max(0.05, deadline.left() - self.settings.expansion_reserve_s),
                    )
            except CALL_ERRORS as err:
                trace.leg("expansion", FAILED, _reason(err))
                return
        exp = trace.expansion
        if not exp.cache_available:
            trace.notices.append("expansion cache (Redis) is not reachable: expansion runs uncached")
        if exp.fallback_reason:
            trace.leg("expansion", FALLBACK, exp.fallback_reason)
            trace.notices.append(f"expansion: {exp.fallback_reason}")
        elif exp.skipped:
            trace.leg("expansion", SKIPPED, exp.skip_reason)
        else:
            trace.leg("expansion", OK, f"{exp.generator}{' (cached)' if exp.cache_hit else ''}")

    async def _fused(self, plan, deadline, trace) -> list[fusion_pb2.FusedHit]:
        """Every list fused, then the collection's metadata boosts on the fused scores."""
        fused = await self._fuse(plan, deadline, trace)
        fused, trace.boosts = boost_fused(fused, lambda chunk_id: trace.hit(chunk_id).metadata, plan.config.boosts,
                                          plan.collection)
        return fused

    async def _fuse(self, plan, deadline, trace) -> list[fusion_pb2.FusedHit]:
        limit = self.settings.fusion_depth
        if len(trace.lists) == 1:
            # One ranked list: fusion would only collapse chunks and scale scores, which the same library
            # does here in microseconds; a hop to the fusion service would cost more than the answer.
            return fuse_proto(trace.lists, plan.fusion, limit, with_text=False)
        request = fusion_pb2.FuseRequest(lists=[_ranks_only(rl) for rl in trace.lists],
                                         config=params_to_proto(plan.fusion), limit=limit, omit_text=True)
        try:
            with self.tracer.start_as_current_span("gateway.fusion"):
                async with self.breakers.guard("fusion"):
                    timeout = min(deadline.left(), self.resilience.fusion_timeout_s)
                    response = await self.backends.fusion.Fuse(request, timeout=timeout)
                    trace.fusion_applied = response.config
                    return list(response.hits)
        except CALL_ERRORS as err:
            # Fusion is a pure function: the gateway can do it itself rather than fail the search.
            trace.notices.append(f"fusion service unavailable ({_reason(err)}): fused in the gateway")
            trace.degraded = True
            metrics.DEGRADED_LEGS.labels(leg="fusion").inc()
            return fuse_proto(trace.lists, plan.fusion, limit, with_text=False)

    async def _rerank(self, plan, fused, deadline, trace) -> Reranked:
        """Reranks the head of the fused list when the plan and the model allow it (gateway.rerank_policy)."""
        unchanged = Reranked(order=list(range(len(fused))))
        cfg = self.settings.rerank
        decision = needs_model(plan.rerank_requested, plan.effort)
        if decision is None:
            model, unavailable = None, ""
            try:
                async with self.breakers.guard("rerank"):
                    model = ModelInfo.of(await self.backends.reranker.model_info())
            except Exception as err:  # Triton down or model not loaded, or its breaker open
                unavailable = _reason(err)
            if model is not None:
                trace.reranker_model = model.name
                if not model.trained:
                    trace.notices.append(f"reranker model {model.name!r} is untrained (fresh classification head)")
            decision = decide_rerank(plan.rerank_requested, plan.effort, cfg, model, unavailable, len(fused))
        if not decision.run:
            trace.leg("rerank", decision.state, decision.reason)
            return unchanged
        head = fused[:decision.pool]
        await self._fill_texts(plan, head, deadline, trace)
        passages = [_passage(trace.hit(h.chunk_id)) for h in head]
        with self._observed("rerank") as span:
            span.set_attribute("rerank.pool", len(head))
            try:
                async with self.breakers.guard("rerank"):
                    scores = await self.backends.reranker.score(plan.query, passages, deadline.left())
            except Exception as err:
                trace.leg("rerank", FAILED, _reason(err))
                return unchanged
        blended = blend(plan.query, [h.normalized_score for h in head], scores, passages, cfg.score_floor,
                        tuple(cfg.bands), cfg.tail_fusion_weight)
        trace.leg("rerank", OK, decision.reason)
        return Reranked(
            order=[b.index for b in blended] + list(range(len(head), len(fused))),
            rerank={b.index: b.rerank for b in blended},
            final={b.index: b.final for b in blended},
        )

    async def _next_page(self, request: search_pb2.SearchRequest, plan: SearchPlan,
                         deadline: Deadline) -> search_pb2.SearchResponse:
        """A later page: the first page's kept order from `offset`, previews from the stored chunks."""
        started = time.perf_counter()
        token, order = await self.pager.order(request)
        hits = list(order.hits[token.offset : token.offset + plan.top_k])
        chunks = await self._stored_chunks([(h.collection or plan.collection, h.doc_id, h.chunk_id) for h in hits],
                                           deadline)
        tags = []
        for rank, hit in enumerate(hits, start=token.offset):
            chunk = chunks.get((hit.collection or plan.collection, hit.chunk_id))
            if chunk and not hit.title:  # a hit kept from below the legs' text depth
                hit.title = chunk.title
            show(hit, plan.query, chunk.text if chunk else "", self.analyzer, rank, plan.effort)
            tags.append(chunk.metadata.get(plan.config_of(hit.collection).tags_field, "") if chunk else "")
        response = search_pb2.SearchResponse()
        response.CopyFrom(order.head)
        response.hits.extend(hits)
        reranked = sum(h.reranked for h in order.hits)
        response.counts.CopyFrom(search_pb2.ResultCounts(
            reranked=reranked, candidates=order.head.total_candidates, returned=len(hits),
            line=counts_line(reranked, order.head.total_candidates, len(hits))))
        response.tag_counts.update(tag_distribution(tags))
        if missing := [h.doc_id for h in hits if (h.collection or plan.collection, h.chunk_id) not in chunks]:
            response.notices.append(f"{len(missing)} hits of this page are no longer stored (deleted since): {missing[:5]}")
        following = token.offset + plan.top_k
        if following < len(order.hits):
            response.next_page_token = self.pager.tokens.issue(token.order_id, following, token.digest)
        response.took_ms = (time.perf_counter() - started) * 1000
        return response

    async def _fill_texts(self, plan: SearchPlan, hits, deadline: Deadline, trace: Trace) -> None:
        """Reads the texts of these fused hits that came from below the legs' text depth (gateway.texts)
        from the stores; one that cannot be read leaves its hit without a preview, noted."""
        if not text_depth(plan, self.settings):  # every hit came with its text
            return
        missing = [h for h in hits if not trace.hit(h.chunk_id).text]
        if not missing:
            return
        t = time.perf_counter()
        try:
            chunks = await self._stored_chunks([(plan.collection, h.doc_id, h.chunk_id) for h in missing], deadline)
        except Refusal as err:
            trace.notices.append(f"texts of {len(missing)} hits not shown: {err}")
            return
        for h in missing:
            if (chunk := chunks.get((plan.collection, h.chunk_id))) is not None:
                leg_hit = trace.hit(h.chunk_id)
                leg_hit.title, leg_hit.text = chunk.title, chunk.text
        trace.timed("texts", t)

    async def _stored_chunks(self, hits: list[tuple[str, str, str]],
                             deadline: Deadline) -> dict[tuple[str, str], common_pb2.Chunk]:
        """The stored chunks of these (collection, doc id, chunk id) by (collection, chunk id): the vector
        leg's own passages ("#p<n>") from the vector store, every other chunk from the BM25 store."""
        wanted: dict[tuple[str, bool], set[str]] = {}
        for collection, doc_id, chunk_id in hits:
            passage = chunk_id.rpartition("#")[2].startswith("p")
            wanted.setdefault((collection, passage), set()).add(doc_id)
        stubs = {True: self.backends.vector, False: self.backends.bm25}
        places = list(wanted)
        calls = [stubs[passage].GetChunks(common_pb2.GetChunksRequest(collection=c, doc_ids=sorted(wanted[c, passage])),
                                          timeout=deadline.left())
                 for c, passage in places]
        try:
            answers = await asyncio.gather(*calls)
        except grpc.aio.AioRpcError as err:
            raise Refusal(f"the page's texts could not be read ({err.code().name}: {err.details()}); retry") from err
        return {(c, chunk.chunk_id): chunk for (c, _), answer in zip(places, answers) for chunk in answer.chunks}

    def _calibrated(self, plan: SearchPlan, fused: list[fusion_pb2.FusedHit], reranked: Reranked, order: list[int],
                    trace: Trace) -> dict[int, float]:
        """Each hit's calibrated score (gateway.calibration), measured on its own collection's scale with its
        collection's boosts, shown non-increasing down the final order (which stays as it is)."""
        cfg = self.settings.rerank
        scales: dict[str, Scale] = {}
        own = []
        for i in order:
            collection = split_key(fused[i].chunk_id, plan.collection)[0]
            part = plan.plan_of(collection)
            if collection not in scales:
                scales[collection] = scale_of(trace.part_lists.get(collection, trace.lists), part.fusion)
            boosts = part.config.boosts
            metadata = trace.hit(fused[i].chunk_id).metadata if boosts else {}
            # A reranked answer's hit outside the pool: the reranked scale, no verification (gateway.calibration).
            probability = reranked.rerank.get(i, 0.0 if reranked.rerank else None)
            score = own_score(fused[i].evidence, scales[collection], probability,
                              fusion_weight(i + 1, tuple(cfg.bands), cfg.tail_fusion_weight),
                              math.prod(factors(metadata, boosts, FUSION)))
            own.append(capped(score, factors(metadata, boosts, RERANK)) if i in reranked.rerank else score)
        return dict(zip(order, non_increasing(own)))

    async def _respond(self, plan, fused, reranked: Reranked, deadline: Deadline, trace) -> search_pb2.SearchResponse:
        finals = reranked.final_scores(fused)
        rerank_scores = reranked.rerank
        order = reranked.order
        for collection, config in plan.configs():  # each collection's boosts on its own hits
            def metadata(i: int, collection=collection):
                mine = not plan.parts or split_key(fused[i].chunk_id, plan.collection)[0] == collection
                return trace.hit(fused[i].chunk_id).metadata if mine else {}
            order, applied = boost_final(finals, order, rerank_scores, metadata, lambda i: fused[i].doc_id,
                                         config.boosts, collection)
            trace.boosts += applied
        scores = self._calibrated(plan, fused, reranked, order, trace)
        kept = [i for i in order if scores[i] >= plan.min_score]
        # Only the page is built: snippets and evidence for hits nobody will see cost most of an answer.
        def hit(i: int) -> search_pb2.SearchHit:
            f = fused[i]
            collection, chunk_id = split_key(f.chunk_id, plan.collection)  # several collections: merged keys
            return search_pb2.SearchHit(
                doc_id=f.doc_id, chunk_id=chunk_id, title=trace.hit(f.chunk_id).title, score=scores[i],
                blended_score=finals[i],
                fusion_score=f.normalized_score, rerank_score=rerank_scores.get(i, 0.0), reranked=i in rerank_scores,
                collection=collection,
                legs=[search_pb2.LegRank(leg=e.leg, kind=e.kind, rank=e.rank, score=e.score) for e in f.evidence],
            )

        # Later pages read the order as kept here (paging.Pager builds it after the answer has gone).
        trace.order, trace.candidates = (lambda n: [hit(i) for i in kept[:n]]), len(kept)
        shown = kept[plan.offset : plan.offset + plan.top_k]
        await self._fill_texts(plan, [fused[i] for i in shown], deadline, trace)
        page, tags = [], []
        for rank, i in enumerate(shown, start=plan.offset):
            leg_hit = trace.hit(fused[i].chunk_id)
            page.append(hit(i))
            show(page[-1], plan.query, leg_hit.text, self.analyzer, rank, plan.effort)
            tags.append(leg_hit.metadata.get(plan.config_of(page[-1].collection).tags_field, ""))
        response = search_pb2.SearchResponse(
            hits=page, legs=list(trace.legs.values()), degraded=trace.degraded, mode=plan.mode, effort=plan.effort,
            total_candidates=len(kept), notices=trace.notices, tag_counts=tag_distribution(tags),
            counts=search_pb2.ResultCounts(reranked=len(rerank_scores), candidates=len(kept), returned=len(page),
                                           line=counts_line(len(rerank_scores), len(kept), len(page))),
            took_ms=(time.perf_counter() - trace.started) * 1000,
        )
        if plan.explain:
            exp = trace.expansion or expansion_pb2.ExpandResponse()
            response.explain.CopyFrom(
                search_pb2.Explanation(
                    lexical_variants=exp.lexical_variants, semantic_variants=exp.semantic_variants, hyde=exp.hyde,
                    expansion_generator=exp.generator, expansion_cache_hit=exp.cache_hit,
                    leg_lists=[_trimmed(rl) for rl in trace.lists],
                    fusion_order=[_explained_id(plan, f) for f in fused[:100]],
                    rerank_scores={_explained_id(plan, fused[i]): s for i, s in rerank_scores.items()},
                    fusion=trace.fusion_applied or params_to_proto(plan.fusion), timings=trace.timings, reranker_model=trace.reranker_model,
                    boosts=trace.boosts,
                    query_language=exp.language, query_language_source=exp.language_source,
                    query_language_confidence=exp.language_confidence,
                )
            )
        return response


def _on_done(context) -> asyncio.Future:
    """A future done once the RPC has finished (its answer sent), whichever thread gRPC tells it on."""
    loop = asyncio.get_running_loop()
    done = loop.create_future()

    def finished(_context) -> None:
        loop.call_soon_threadsafe(lambda: done.done() or done.set_result(None))

    context.add_done_callback(finished)
    return done


def _explained_id(plan: SearchPlan, hit: fusion_pb2.FusedHit) -> str:
    """A fused hit as explain names it: its doc id, "collection/doc_id" when several collections are
    searched (doc ids may repeat between them; collection names have no "/")."""
    return f"{split_key(hit.chunk_id, plan.collection)[0]}/{hit.doc_id}" if plan.parts else hit.doc_id


def _variant_queries(expansion: expansion_pb2.ExpandResponse | None) -> list[common_pb2.LegQuery]:
    """The expansion's variant queries, each of its kind (the legs pick the kinds they take)."""
    if expansion is None or expansion.skipped:
        return []
    queries = [common_pb2.LegQuery(text=v, kind=common_pb2.QUERY_KIND_LEXICAL_VARIANT) for v in expansion.lexical_variants]
    queries += [common_pb2.LegQuery(text=v, kind=common_pb2.QUERY_KIND_SEMANTIC_VARIANT) for v in expansion.semantic_variants]
    if expansion.hyde:
        queries.append(common_pb2.LegQuery(text=expansion.hyde, kind=common_pb2.QUERY_KIND_HYDE))
    return queries


def _passage(hit: common_pb2.LegHit) -> str:
    return f"{hit.title}\n{hit.text}" if hit.title else hit.text


def _trimmed(rl: common_pb2.RankedList, keep: int = 20) -> common_pb2.RankedList:
    out = common_pb2.RankedList(leg=rl.leg, kind=rl.kind, query=rl.query, weight=rl.weight)
    out.hits.extend(common_pb2.LegHit(chunk_id=h.chunk_id, doc_id=h.doc_id, score=h.score, rank=h.rank) for h in rl.hits[:keep])
    return out


def _ranks_only(ranked: common_pb2.RankedList) -> common_pb2.RankedList:
    """The list as fusion reads it: ids, scores and ranks. The gateway keeps the texts, so they need not
    travel to the fusion service (BALANCED's lists carry ~1 MB of passages: 7 ms of the hop on SciFact)."""
    return common_pb2.RankedList(
        leg=ranked.leg, kind=ranked.kind, query=ranked.query, weight=ranked.weight,
        hits=[common_pb2.LegHit(chunk_id=h.chunk_id, doc_id=h.doc_id, score=h.score, rank=h.rank) for h in ranked.hits],
    )
