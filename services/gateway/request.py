"""SearchRequest validation: every rule in one place, each failure a clear INVALID_ARGUMENT."""

from __future__ import annotations

from dataclasses import dataclass, field

from hybridsearch.common.collections import DEFAULT, CollectionConfig, collection_config
from hybridsearch.common.config import Settings
from hybridsearch.common.effort import DEFAULT_EFFORT, effort_policy
from hybridsearch.common.language import check_language
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
    fuzzy: bool  # typo tolerance in the BM25 leg: the request's, else the collection's default
    config: CollectionConfig = field(default_factory=lambda: DEFAULT)  # what the collection declares (tag leg, boosts)
    expand: bool | None = None  # None: the effort decides query expansion (variants, HyDE, Rocchio)
    language: str = ""  # the request's override (common.language.SUPPORTED); empty: expansion detects it
    page_token: str = ""  # a later page: read from the first page's kept order (gateway/paging.py)

    @property
    def expands(self) -> bool:
        """Whether the expansion service is asked (the request's word, else the effort's row)."""
        return self.expand if self.expand is not None else effort_policy(self.effort).expands

    @property
    def rocchio(self) -> bool:
        """Whether the vector leg adds its Rocchio feedback list (query-side expansion too)."""
        return self.expand if self.expand is not None else effort_policy(self.effort).rocchio_feedback
    graph: bool = False  # link expansion (gateway.graph): the request's `graph`, else the collection's

    @property
    def metadata_fields(self) -> list[str]:
        """The metadata keys the answer reads: the boosts' fields and the tags (the answer's tag distribution);
        the legs bring back only these with their hits."""
        return sorted({b.field for b in self.config.boosts} | {self.config.tags_field})


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
    if request.page_token and request.offset:
        raise InvalidArgument("page_token and offset exclude each other: a page token already names its page")
    collection = check_collection(request.collection)
    config = collection_config(settings, collection)
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
        config=config,
        expand=request.expand if request.HasField("expand") else None,
        language=check_language(request.language) if request.language else "",
        fuzzy=request.fuzzy if request.HasField("fuzzy") else config.fuzzy,
        page_token=request.page_token,
        graph=request.graph if request.HasField("graph") else config.graph,
    )
