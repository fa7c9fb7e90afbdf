"""SearchRequest validation: every rule in one place, each failure a clear INVALID_ARGUMENT."""

from __future__ import annotations

from dataclasses import dataclass, field

from hybridsearch.config.collections import DEFAULT, CollectionConfig, collection_config
from hybridsearch.config.settings import Settings
from hybridsearch.query.effort import DEFAULT_EFFORT, effort_policy, why_not_expand
from hybridsearch.text.language import check_language
from hybridsearch.contract.limits import MAX_CONTEXT, MAX_QUERY_CHARS
from hybridsearch.security.sealing import CollectionSeal
from hybridsearch.contract.validation import InvalidArgument, check_collection, check_field, check_filters
from hybridsearch.fusion.methods import FusionParams
from hybridsearch.fusion.params import resolve_params
from hybridsearch.v1 import common_pb2, search_pb2

MAX_TOP_K = 100
MAX_DEPTH = 1000
MAX_COLLECTIONS = 8  # collections one query may fan out to (gateway.query.fanout)


@dataclass(frozen=True)
class SearchPlan:
    """One search as the request asked for it, validated; built once (plan_search), changed only by copies
    (dataclasses.replace: the sealed form, the store names resolved)."""
    query: str
    collection: str
    top_k: int
    offset: int
    mode: common_pb2.RetrievalMode  # the proto enums (ints at run time)
    effort: common_pb2.Effort
    filters: list
    fusion: FusionParams
    rerank_requested: bool | None  # None: effort and model decide
    min_score: float
    explain: bool
    fuzzy: bool  # typo tolerance in the BM25 leg: the request's, else the collection's default
    config: CollectionConfig = field(default_factory=lambda: DEFAULT)  # what the collection declares (tag leg, boosts)
    expand: bool | None = None  # None: the effort decides query expansion (variants, HyDE, Rocchio)
    language: str = ""  # the request's override (text.language.SUPPORTED); empty: expansion detects it
    page_token: str = ""  # a later page: read from the first page's kept order (gateway/query/paging.py)
    # Several collections (gateway.query.fanout): one plan per collection, each with its own config; empty for one.
    # This plan's `collection`/`config` are then the primary's (the request's `collection`, else the first).
    parts: tuple["SearchPlan", ...] = ()
    # The name the stores hold `collection` under: an alias's serving generation (gateway/resources/aliases.py), set once
    # the plan is resolved (SearchServicer); empty: the collection's own name.
    stored: str = ""

    prf_in_balanced: bool = True  # expansion.prf_in_balanced: whether BALANCED expands unasked
    # A sealed collection's seal (gateway.query.sealed.seal_plan: filters and boosts then hold keyed hashes); None: plain.
    seal: CollectionSeal | None = None
    # What this plan could not do as asked, said in the answer's notices (gateway.query.sealed: a hashed-terms
    # collection's typo tolerance).
    notices: tuple[str, ...] = ()

    @property
    def no_expansion(self) -> str | None:
        """Why the expansion service is not asked (None: it is): query.effort.why_not_expand, the one rule."""
        return why_not_expand(self.effort, self.expand, self.prf_in_balanced)

    @property
    def expands(self) -> bool:
        return self.no_expansion is None

    @property
    def rocchio(self) -> bool:
        """Whether the vector leg adds its Rocchio feedback list (query-side expansion too)."""
        return self.expand if self.expand is not None else effort_policy(self.effort).rocchio_feedback
    graph: bool = False  # link expansion (gateway.query.graph): the request's `graph`, else the collection's
    # The metadata each hit shows (SearchHit.metadata): the request's return_metadata, else the collection's.
    return_metadata: tuple[str, ...] = ()
    context: int = 0  # neighbouring chunks before and after each hit (SearchRequest.context)

    @property
    def metadata_fields(self) -> list[str]:
        """The metadata keys the answer reads: the boosts' fields, the tags (the answer's tag distribution), the
        fields its hits show (SHOWN_FIELDS and return_metadata); the legs bring back only these with their hits."""
        return sorted({b.field for b in self.config.boosts} | {self.config.tags_field} | set(SHOWN_FIELDS)
                      | set(self.return_metadata))

    def configs(self) -> list[tuple[str, CollectionConfig]]:
        """(collection, config) of every collection the plan searches."""
        return [(p.collection, p.config) for p in self.parts] or [(self.collection, self.config)]

    def plan_of(self, collection: str) -> "SearchPlan":
        """The plan of one of the plan's collections (a hit's), this plan for any other name."""
        return next((p for p in self.parts if p.collection == collection), self)

    @property
    def store_name(self) -> str:
        """The name the stores are asked for (the alias's serving generation, else the collection)."""
        return self.stored or self.collection

    def stored_of(self, collection: str) -> str:
        """The store name of one of the plan's collections (a hit's)."""
        part = self.plan_of(collection)
        return part.store_name if part.collection == collection else collection

    def config_of(self, collection: str) -> CollectionConfig:
        """The config of one of the plan's collections (a hit's), this plan's own for any other name."""
        return self.plan_of(collection).config


def check_search_collections(names, collection: str) -> tuple[list[str], str]:
    """The request's `collections` (2..MAX_COLLECTIONS distinct valid names; one behaves as `collection`)
    and the primary collection: `collection` if set (it must be one of them), else the first."""
    names = list(names)
    if not names:
        return [], check_collection(collection)
    if len(names) > MAX_COLLECTIONS:
        raise InvalidArgument(f"collections names {len(names)} collections; the limit is {MAX_COLLECTIONS}")
    if "" in names:
        raise InvalidArgument("collections has an empty name")
    checked = [check_collection(n) for n in names]
    if len(set(checked)) != len(checked):
        doubled = sorted({n for n in checked if checked.count(n) > 1})
        raise InvalidArgument(f"collections names {', '.join(doubled)} more than once; each collection once")
    if collection and check_collection(collection) not in checked:
        raise InvalidArgument(f"collection {collection!r} is not one of collections {checked}: "
                              "leave collection empty or name one of them")
    primary = check_collection(collection) if collection else checked[0]
    return (checked if len(checked) > 1 else []), primary


# What every hit shows when its document has it (SearchHit.path, type, modified): the folder readers set them.
SHOWN_FIELDS = ("path", "type", "modified")
MAX_RETURN_METADATA = 32  # with the boosts, tags and SHOWN_FIELDS within the legs' MAX_METADATA_FIELDS (64)


def check_return_metadata(fields) -> None:
    if len(fields) > MAX_RETURN_METADATA:
        raise InvalidArgument(f"return_metadata names {len(fields)} fields; the limit is {MAX_RETURN_METADATA}")
    for i, name in enumerate(fields):
        check_field(name, f"return_metadata[{i}]")


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
    if not 0 <= request.context <= MAX_CONTEXT:
        raise InvalidArgument(f"context must be 0-{MAX_CONTEXT} chunks before and after a hit, got {request.context}")
    check_return_metadata(request.return_metadata)
    collections, primary = check_search_collections(request.collections, request.collection)
    parts = tuple(_plan(request, settings, query, top_k, c) for c in collections)
    return _plan(request, settings, query, top_k, primary, parts)


def _plan(request: search_pb2.SearchRequest, settings: Settings, query: str, top_k: int,
          collection: str, parts: tuple[SearchPlan, ...] = ()) -> SearchPlan:
    """The plan of one collection: its own config decides what the request leaves open."""
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
        min_score=request.min_score or (0.0 if request.no_floor else settings.query.default_min_score),
        explain=request.explain,
        config=config,
        expand=request.expand if request.HasField("expand") else None,
        language=check_language(request.language) if request.language else "",
        fuzzy=request.fuzzy if request.HasField("fuzzy") else config.fuzzy,
        page_token=request.page_token,
        graph=request.graph if request.HasField("graph") else config.graph,
        return_metadata=tuple(request.return_metadata or config.return_metadata),
        context=request.context,
        prf_in_balanced=settings.expansion.prf_in_balanced,
        parts=parts,
    )
