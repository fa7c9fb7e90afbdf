"""The retrieval stage of one collection: every leg of the registry the plan uses on the original query,
and at the same time expansion, whose variant queries then run through the legs written for their kind.

When the plan expands, the legs that take variants wait up to `variant_batch_wait_s` for expansion: if it
answers in that window (PRF, a cached answer), each such leg gets its original query and its variants in
one call (one hop, one embedding batch in the vector leg). Otherwise (an LLM still generating) the
originals go at once and the variants follow, as soon as expansion answers, as a round of their own.

Each round is judged against its like by the straggler rule (gateway.query.legs.stragglers): the
original calls together, and the variant calls together from when they start, so a variant round that
begins seconds after the originals answered (THOROUGH waits for its LLM) is not cut for being "late".
A leg whose original call has already failed runs no variants.
"""

from __future__ import annotations

import asyncio
import time

from hybridsearch.gateway.query.deadline import Deadline
from hybridsearch.gateway.query.expander import Expander, variant_queries
from hybridsearch.gateway.query.legs.protocol import RetrievalLeg
from hybridsearch.gateway.query.legs import registry
from hybridsearch.gateway.query.legs.runner import LegRunner
from hybridsearch.gateway.query.report import SKIPPED, LegStatus, Report
from hybridsearch.gateway.query.request import SearchPlan
from hybridsearch.v1 import common_pb2

Lists = list[common_pb2.RankedList]


async def retrieve(plan: SearchPlan, deadline: Deadline, runner: LegRunner, expander: Expander,
                   report: Report, batch_wait_s: float = 0.0) -> Lists | None:
    """Every ranked list of the collection (originals in registry order, then the variants'), or None when
    no leg answered its original query."""
    legs = registry.LEGS.values()  # read per search: the registry is the leg table's (query.legs)
    used = [leg for leg in legs if leg.used_by(plan)]
    for leg in legs:
        if leg not in used:
            report.legs[leg.name] = LegStatus(name=leg.name, state=SKIPPED, reason=leg.off)
    original = [common_pb2.LegQuery(text=plan.query, kind=common_pb2.QUERY_KIND_ORIGINAL)]
    t = time.perf_counter()
    expansion = asyncio.ensure_future(expander.expand(plan, deadline, report))
    stragglers = runner.stragglers(len(used))

    def call(leg: RetrievalLeg, variants: list[common_pb2.LegQuery]) -> asyncio.Future:
        return asyncio.ensure_future(runner.run(leg, plan, original + _taken(leg, variants), deadline, report,
                                                stragglers=stragglers))

    waiting = [leg for leg in used if plan.expands and batch_wait_s and _takes_variants(leg)]
    calls = {leg.name: call(leg, []) for leg in used if leg not in waiting}  # at once: nothing to wait for
    batched: list[common_pb2.LegQuery] = []
    if waiting:
        done, _ = await asyncio.wait({expansion}, timeout=batch_wait_s)
        if done:
            batched = variant_queries(expansion.result())
    calls |= {leg.name: call(leg, batched) for leg in waiting}
    calls = {leg.name: calls[leg.name] for leg in used}  # registry order, whatever started first
    try:
        variants = [] if batched else await _variants(plan, used, calls, expansion, deadline, runner, report)
        originals = await asyncio.gather(*calls.values())
    finally:
        for call in (*calls.values(), expansion):
            call.cancel()
        if stragglers is not None:
            stragglers.close()
    report.timed("retrieve+expand", t)
    if all(lists is None for lists in originals):
        return None
    return [rl for lists in originals if lists for rl in lists] + variants


def _takes_variants(leg: RetrievalLeg) -> bool:
    return bool(leg.kinds - {common_pb2.QUERY_KIND_ORIGINAL})


def _taken(leg: RetrievalLeg, queries: list[common_pb2.LegQuery]) -> list[common_pb2.LegQuery]:
    """The queries of `queries` the leg was written for."""
    return [q for q in queries if q.kind in leg.kinds]


async def _variants(plan: SearchPlan, used: list[RetrievalLeg], originals: dict[str, asyncio.Future],
                    expansion: asyncio.Future, deadline: Deadline, runner: LegRunner, report: Report) -> Lists:
    """Once expansion has answered, its variant queries through the legs they were written for, as one round."""
    queries = variant_queries(await expansion)
    runs = [(leg, mine) for leg in used if (mine := _taken(leg, queries)) and not _failed(originals[leg.name])]
    if not runs:
        return []
    t = time.perf_counter()
    stragglers = runner.stragglers(len(runs))
    try:
        answers = await asyncio.gather(*(runner.run(leg, plan, mine, deadline, report, variants=True,
                                                    stragglers=stragglers) for leg, mine in runs))
    finally:
        if stragglers is not None:
            stragglers.close()
    report.timed("variants", t)
    return [rl for lists in answers if lists for rl in lists]


def _failed(call: asyncio.Future) -> bool:
    """Whether a leg's original call has already ended without a list (still running: not failed)."""
    return call.done() and not call.cancelled() and call.exception() is None and call.result() is None
