"""Every retrieval leg the gateway runs beside the others, keyed by its proto `Leg` value: the one place a
leg is registered. LEG_GRAPH is not here: link expansion runs after fusion (gateway.graph)."""

from __future__ import annotations

from types import MappingProxyType

from hybridsearch.gateway.legs.bm25 import Bm25Leg
from hybridsearch.gateway.legs.protocol import RetrievalLeg
from hybridsearch.gateway.legs.tag import TagLeg
from hybridsearch.gateway.legs.vector import VectorLeg
from hybridsearch.v1 import common_pb2

LEGS: MappingProxyType[int, RetrievalLeg] = MappingProxyType({
    common_pb2.LEG_BM25: Bm25Leg(),
    common_pb2.LEG_VECTOR: VectorLeg(),
    common_pb2.LEG_TAG: TagLeg(),
})
