"""Link expansion (`graph`; GNO's optional graph expansion): a stage between fusion and rerank.

When the plan asks for it (the request's `graph`, else the collection's), the top `graph.seeds` fused
documents are seeds. The vector service's Neighbours answers their one-hop neighbours (links either
way, [[wiki]] links; explicit above wiki above ambiguous; the request's filters applied; at most
`graph.neighbours`), each by its best chunk for the query: one LEG_GRAPH list. It joins the ranked
lists with fusion's `graph_weight` and the search fuses a second time before rerank.

A neighbour that is already a candidate keeps the chunk fusion chose for it: its graph hit is rewritten
to that chunk, so linked evidence lifts that chunk instead of adding another of the same document.

The call is a leg like the others (gateway.query.legs.runner: span, breaker, errors, leg state, timings), with
its own breaker part ("graph") and budget (`graph.timeout_s`); it is not in the registry
(gateway.query.legs.registry) because it runs after fusion, not beside the other legs. The stage returns the
neighbours' list; the query path adds it to the pool and fuses again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from hybridsearch.config.search import GraphSettings
from hybridsearch.gateway.query.report import OK, SKIPPED, LegStatus
from hybridsearch.security.acl import of_request
from hybridsearch.fusion.packed import FusedDoc
from hybridsearch.v1 import common_pb2, vector_pb2

NAME = "graph"


@dataclass(frozen=True)
class GraphLeg:
    """The Neighbours call of one search, as a RetrievalLeg (gateway.query.legs.protocol)."""

    seeds: tuple[str, ...]
    cfg: GraphSettings  # how many neighbours, within what time
    leg: int = common_pb2.LEG_GRAPH
    name: str = NAME
    part: str = NAME
    off: str = "off"
    kinds: frozenset[int] = frozenset({common_pb2.QUERY_KIND_ORIGINAL})

    def used_by(self, plan) -> bool:
        return plan.graph

    def request(self, base, plan, legs) -> vector_pb2.NeighboursRequest:
        return vector_pb2.NeighboursRequest(collection=base.collection, seeds=self.seeds, query=base.queries[0],
                                            limit=self.cfg.neighbours, filters=base.filters,
                                            metadata_fields=base.metadata_fields, readers=of_request(base))

    def call(self, backends, request, timeout):
        return backends.vector.Neighbours(request, timeout=min(timeout, self.cfg.timeout_s))


def seeds(fused: Sequence[FusedDoc], count: int) -> tuple[str, ...]:
    """The documents whose neighbours are looked up: the top `count` of the first fusion."""
    return tuple(f.doc_id for f in fused[:count])


def keep_chunks(graph_list: common_pb2.RankedList, fused: Sequence[FusedDoc]) -> int:
    """Rewrites each graph hit of a document already fused to the chunk fusion chose; how many were."""
    chosen = {f.doc_id: f.chunk_id for f in fused}
    kept = 0
    for hit in graph_list.hits:
        if hit.doc_id in chosen:
            hit.chunk_id = chosen[hit.doc_id]
            kept += 1
    return kept


async def neighbours(plan, fused: Sequence[FusedDoc], cfg: GraphSettings, runner, deadline,
                     report) -> common_pb2.RankedList | None:
    """The graph stage: the neighbours' list (its hits of fused documents rewritten to their fused chunk),
    or None when the stage is off, failed or found nothing. `runner` is gateway.query.legs.runner.LegRunner."""
    if not plan.graph:
        report.legs[NAME] = LegStatus(name=NAME, state=SKIPPED, reason="off")
        return None
    top = seeds(fused, cfg.seeds)
    if not top:
        report.legs[NAME] = LegStatus(name=NAME, state=SKIPPED, reason="no fused documents to start from")
        return None
    original = [common_pb2.LegQuery(text=plan.query, kind=common_pb2.QUERY_KIND_ORIGINAL)]
    lists = await runner.run(GraphLeg(top, cfg), plan, original, deadline, report)
    if not lists:
        return None
    graph_list = lists[0]
    kept = keep_chunks(graph_list, fused)
    new = len(graph_list.hits) - kept
    report.legs[NAME] = LegStatus(name=NAME, state=OK, reason=f"{len(graph_list.hits)} neighbours of {len(top)} seeds "
                                  f"({new} new, {kept} already candidates); {report.legs[NAME].reason}")
    return graph_list if graph_list.hits else None
