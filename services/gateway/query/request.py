"""SearchRequest validation: every rule in one place, each failure a clear INVALID_ARGUMENT."""

from __future__ import annotations

from dataclasses import dataclass, field

from hybridsearch.config.collections import DEFAULT, CollectionConfig, collection_config
from hybridsearch.config.settings import Settings
from hybridsearch.query.effort import DEFAULT_EFFORT, effort_policy, why_not_expand
from hybridsearch.text.language import check_language
from hybridsearch.contract.limits import MAX_CONTEXT, MAX_QUERY_CHARS
from hybridsearch.security.sealing import CollectionSeal
from hybridsearch.contract.validation import check_field, check_filters, check_search_collections
from hybridsearch.contract.errors import InvalidArgument
from hybridsearch.fusion.methods import FusionParams
from hybridsearch.fusion.params import resolve_params
from hybridsearch.gateway.access.auth import readers
from hybridsearch.security.acl import readers_key
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
    # The collections the request names, validated, before any that no store holds is left out (gateway.query.locate):
    # what a page token's digest names (gateway.query.paging.request_digest), on every page of the search alike.
    requested: tuple[str, ...] = ()
    # Whom the documents are read as (gateway.access.auth.readers: the caller's principals; None with auth off): every
    # leg, expansion's probe, link expansion and typo correction search only what they may read.
    readers: common_pb2.Readers | None = None

    @property
    def readers_key(self) -> str:
        """Whom every collection of the plan is read as, in short (security/acl.readers_key; "" with auth off): what
        keys what is kept of one reader's search (page orders) apart from another's."""
        return ",".join(readers_key(p.readers) for p in (self.parts or (self,))).strip(",")

    @property
    def metadata_fields(self) -> list[str]:
        """The metadata keys the answer reads: the boosts' fields, the tags (the answer's tag distribution), the
        fields its hits show (SHOWN_FIELDS and return_metadata); the legs bring back only these with their hits."""
        return sorted({b.field for b in self.config.boosts} | {self.config.tags_field} | set(SHOWN_FIELDS)
                      | set(self.return_metadata))

    @property
    def configs(self) -> list[tuple[str, CollectionConfig]]:
        """(collection, config) of every collection the plan searches."""
        return [(p.collection, p.config) for p in self.parts] or [(self.collection, self.config)]

    @property
    def plans(self) -> dict[str, "SearchPlan"]:
        """The plan of each collection the plan searches, by name."""
        return {p.collection: p for p in self.parts} or {self.collection: self}

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

    @property
    def shows(self) -> dict[str, tuple[tuple[str, ...], str]]:
        """What a hit of each of the plan's collections shows of its document: its fields, and its tags field."""
        return {c: (self.plan_of(c).return_metadata, config.tags_field) for c, config in self.configs}

    def config_of(self, collection: str) -> CollectionConfig:
        """The config of one of the plan's collections (a hit's), this plan's own for any other name."""
        return self.plan_of(collection).config


# What every hit shows when its document has it (SearchHit.path, type, modified): the folder readers set them.
SHOWN_FIELDS = ("path", "type", "modified")
MAX_RETURN_METADATA = 32  # with the boosts, tags and SHOWN_FIELDS within the legs' MAX_METADATA_FIELDS (64)


def plan_search(request: search_pb2.SearchRequest, settings: Settings) -> SearchPlan:
    """The request checked once, whole (each rule a clear INVALID_ARGUMENT), then a plan per collection it
    searches, each with what its collection declares."""
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
    if len(request.return_metadata) > MAX_RETURN_METADATA:
        raise InvalidArgument(f"return_metadata names {len(request.return_metadata)} fields; the limit is "
                              f"{MAX_RETURN_METADATA}")
    # the rules the contract keeps (contract/validation.py), one after the other; then what settings resolve
    for i, name in enumerate(request.return_metadata):
        check_field(name, f"return_metadata[{i}]")
    collections, primary = check_search_collections(request.collections, request.collection, MAX_COLLECTIONS)
    filters = check_filters(request.filters)
    language = check_language(request.language) if request.language else ""
    fusion = resolve_params(request.fusion, settings.fusion)
    shared = dict(query=query, top_k=top_k, offset=request.offset, mode=request.mode or common_pb2.RETRIEVAL_MODE_HYBRID,
                  effort=request.effort or DEFAULT_EFFORT, filters=filters, fusion=fusion, language=language,
                  rerank_requested=request.rerank if request.HasField("rerank") else None,
                  min_score=request.min_score or (0.0 if request.no_floor else settings.query.default_min_score),
                  explain=request.explain, expand=request.expand if request.HasField("expand") else None,
                  page_token=request.page_token, context=request.context, requested=tuple(collections) or (primary,),
                  prf_in_balanced=settings.expansion.prf_in_balanced)
    configs = {c: collection_config(settings, c) for c in dict.fromkeys([*collections, primary])}
    # each collection's plan: the request's checked values, its own config for what the request leaves open
    auth_on = settings.auth.keys_file is not None
    own = {c: dict(collection=c, config=config, fuzzy=request.fuzzy if request.HasField("fuzzy") else config.fuzzy,
                   graph=request.graph if request.HasField("graph") else config.graph, readers=readers(config, auth_on),
                   return_metadata=tuple(request.return_metadata or config.return_metadata))
           for c, config in configs.items()}
    parts = tuple(SearchPlan(**shared, **own[c]) for c in collections)
    return SearchPlan(**shared, **own[primary], parts=parts)
