"""SearchRequest validation: every rule in one place, each failure a clear INVALID_ARGUMENT."""

from __future__ import annotations

from dataclasses import dataclass, field

from hybridsearch.common.collections import DEFAULT, CollectionConfig, collection_config
from hybridsearch.common.config import Settings
from hybridsearch.common.effort import DEFAULT_EFFORT
from hybridsearch.common.limits import MAX_QUERY_CHARS
from hybridsearch.common.validation import InvalidArgument, check_collection, check_filters
from hybridsearch.fusion.methods import FusionParams
from hybridsearch.fusion.params import resolve_params
from hybridsearch.v1 import common_pb2, search_pb2

MAX_TOP_K = 100
MAX_DEPTH = 1000


@dataclass
class SearchPlan:
    query: str
    collection: str
    top_k: int
    offset: int
    mode: int
    effort: int
    filters: list
    fusion: FusionParams
    rerank_requested: bool | None  # None: effort and model decide
    min_score: float
    explain: bool
    config: CollectionConfig = field(default_factory=lambda: DEFAULT)  # what the collection declares (tag leg, boosts)
    graph: bool = False  # link expansion (gateway.graph): the request's `graph`, else the collection's

    @property
    def metadata_fields(self) -> list[str]:
        """The metadata keys the collection's boosts read: the legs bring them back with their hits."""
        return sorted({b.field for b in self.config.boosts})


def plan_search(request: search_pb2.SearchRequest, settings: Settings) -> SearchPlan:
    query = request.query.strip()
    if not query:
        raise InvalidArgument("query is empty")
    if len(request.query) > MAX_QUERY_CHARS:
        raise InvalidArgument(f"query is {len(request.query)} characters; the limit is {MAX_QUERY_CHARS}")
    top_k = request.top_k if request.HasField("top_k") else 10
    if not 1 <= top_k <= MAX_TOP_K:
        raise InvalidArgument(f"top_k must be 1-{MAX_TOP_K}, got {top_k}")
    if request.offset < 0 or request.offset + top_k > MAX_DEPTH:
        raise InvalidArgument(f"offset must be >= 0 and offset + top_k <= {MAX_DEPTH}, got offset {request.offset}")
    if request.mode not in common_pb2.RetrievalMode.values():
        raise InvalidArgument(f"unknown retrieval mode {request.mode}")
    if request.effort not in common_pb2.Effort.values():
        raise InvalidArgument(f"unknown effort {request.effort}")
    if not 0.0 <= request.min_score <= 1.0:
        raise InvalidArgument(f"min_score must be within [0, 1], got {request.min_score}")
    collection = check_collection(request.collection)
    return SearchPlan(
        query=query,
        collection=collection,
        top_k=top_k,
        offset=request.offset,
        mode=request.mode or common_pb2.RETRIEVAL_MODE_HYBRID,
        effort=request.effort or DEFAULT_EFFORT,
        filters=check_filters(request.filters),
        fusion=resolve_params(request.fusion, settings.fusion),
        rerank_requested=request.rerank if request.HasField("rerank") else None,
        min_score=request.min_score,
        explain=request.explain,
        config=collection_config(settings, collection),
        graph=request.graph if request.HasField("graph") else collection_config(settings, collection).graph,
    )
