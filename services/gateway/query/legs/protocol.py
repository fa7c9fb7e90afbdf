"""What a retrieval leg is to the gateway: one small typed interface.

A leg is one module (bm25.py, vector.py, tag.py) and one row of the leg table (query/legs.py: its name,
Leg value, fusion weights, top-rank bonus and this class), from which the registry (legs/registry.py) is
built; the search pipeline loops over the registry and never names a leg, and fusion, settings, metrics
and calibration read the same row. Adding a leg is a module and its row.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Awaitable, Protocol

from hybridsearch.config.stores import VectorSettings
from hybridsearch.security.hashed_terms import HashedTerms
from hybridsearch.gateway.backends import Backends
from hybridsearch.gateway.query.request import SearchPlan
from hybridsearch.v1 import common_pb2


@dataclass(frozen=True)
class LegSettings:
    """What the legs' requests read of the deployment, handed to each `request`: the vector section (Rocchio's
    feedback depth) and the hashed terms a hashed-terms collection's BM25 query is sent as (made with the BM25
    section's analysis)."""

    vector: VectorSettings
    hashed_terms: HashedTerms


class RetrievalLeg(Protocol):
    """One ranked-list source: which plans use it, which queries it takes, how its service is called."""

    leg: int                # its common_pb2.Leg value (its leg table row's): how fusion and the answer's evidence name it
    name: str               # its row's name: LegStatus, span, stage timings, metrics label, fusion weight key
    part: str               # the service that answers it: the breaker it is counted against
    off: str                # its SKIPPED reason when a plan does not use it
    kinds: frozenset[int]   # the common_pb2.QueryKind values it runs (ORIGINAL and its variants)

    def used_by(self, plan: SearchPlan) -> bool:
        """Whether this search runs the leg at all (mode, collection configuration)."""
        ...

    def request(self, base: common_pb2.LegSearchRequest, plan: SearchPlan,
                legs: LegSettings) -> common_pb2.LegSearchRequest:
        """The leg's request: `base` (collection, queries, depth, filters) plus what only this leg needs."""
        ...

    def call(self, backends: Backends, request: common_pb2.LegSearchRequest,
             timeout: float) -> Awaitable[common_pb2.LegSearchResponse]:
        """The RPC to the leg's service."""
        ...
