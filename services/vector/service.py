"""VectorService: embeds queries and chunks, searches Qdrant, optional Rocchio feedback.

Embedders per collection: each collection's vectors are made by the embedder recorded with it (the
store's VectorSpace), the deployment's default (vector.embedder) unless CreateCollection named another:
a collection is re-indexed into a generation collection (`notes.g2`) embedded with another model, beside
the serving one, in this same process.

Typo tolerance: a search that asks for `fuzzy` embeds its original query, and the variants built on its
words, as the BM25 service corrects them (Bm25Service.Correct: each word the index does not know replaced by
its likeliest indexed neighbour), since the embedder has no fuzzy matching of its own. A query whose
correction fails is embedded as typed.
"""

from __future__ import annotations

import asyncio
import logging
import time

import grpc

from hybridsearch.config.settings import get_settings
from hybridsearch.runtime.server import internal_channel, serve
from hybridsearch.contract.limits import MAX_LEG_LIMIT, MAX_QUERY_CHARS
from hybridsearch.storage.store_servicer import StoreServicerMixin, StoreSnapshotsMixin, check_leg_search, check_metadata_fields, trim_texts
from hybridsearch.contract.validation import check_collection, check_doc_ids, check_filters
from hybridsearch.contract.errors import InvalidArgument, abort_invalid
from hybridsearch.security.acl import of_request
from hybridsearch.v1 import bm25_pb2, bm25_pb2_grpc, common_pb2, vector_pb2, vector_pb2_grpc
from hybridsearch.vector.engine import DenseEngine

MAX_SEEDS = 50


from hybridsearch.vector.dense import VectorEngine

log = logging.getLogger(__name__)
CORRECT_TIMEOUT_S = 0.5  # at most this long for the BM25 service's correction, within the caller's deadline
# What is corrected: the query as typed and the variants expansion builds on its words (PRF's semantic
# variant is the query's core plus feedback terms). HyDE passages and feedback are generated text, left as is.
CORRECTED_KINDS = frozenset({common_pb2.QUERY_KIND_ORIGINAL, common_pb2.QUERY_KIND_LEXICAL_VARIANT,
                             common_pb2.QUERY_KIND_SEMANTIC_VARIANT})


class VectorServicer(StoreServicerMixin, StoreSnapshotsMixin, vector_pb2_grpc.VectorServiceServicer):
    def __init__(self, engine: DenseEngine, bm25: bm25_pb2_grpc.Bm25ServiceStub | None = None) -> None:
        self.engine = engine
        self.bm25 = bm25  # for typo tolerance (Correct); None: queries are embedded as typed

    async def _corrected(self, collection: str, queries: list[common_pb2.LegQuery], context,
                         readers: common_pb2.Readers | None) -> list[common_pb2.LegQuery]:
        """The queries as the BM25 service corrects them (the original and the variants built on its words,
        at once); each one that cannot be corrected in time stays as typed."""
        remaining = context.time_remaining()
        timeout = min(CORRECT_TIMEOUT_S, remaining / 2) if remaining is not None else CORRECT_TIMEOUT_S

        async def corrected(q: common_pb2.LegQuery) -> common_pb2.LegQuery:
            if q.kind not in CORRECTED_KINDS:
                return q
            try:
                reply = await self.bm25.Correct(bm25_pb2.CorrectRequest(collection=collection, query=q.text,
                                                                        readers=readers), timeout=timeout)
            except grpc.aio.AioRpcError as err:
                log.warning("query correction failed (%s): embedding the query as typed", err.code().name)
                return q
            return common_pb2.LegQuery(text=reply.query or q.text, kind=q.kind)

        return list(await asyncio.gather(*map(corrected, queries)))

    async def Search(self, request: common_pb2.LegSearchRequest, context) -> common_pb2.LegSearchResponse:
        try:
            collection, filters = check_leg_search(request)
        except InvalidArgument as err:
            await abort_invalid(context, err)
        timings: dict[str, float] = {}
        queries = list(request.queries)
        if request.fuzzy and self.bm25 is not None and any(q.kind in CORRECTED_KINDS for q in queries):
            started = time.perf_counter()
            queries = await self._corrected(collection, queries, context, of_request(request))
            timings["correct"] = (time.perf_counter() - started) * 1000
        lists = await self._on(collection, context, self.engine.search(
            collection, queries, request.limit, filters, request.feedback_docs, timings,
            tuple(request.metadata_fields), request.text_depth, of_request(request)))
        return common_pb2.LegSearchResponse(engine=self.engine.name, lists=trim_texts(lists, request.text_depth),
                                            timings_ms=timings)

    async def TagSearch(self, request: common_pb2.LegSearchRequest, context) -> common_pb2.LegSearchResponse:
        try:
            collection, filters = check_leg_search(request)
        except InvalidArgument as err:
            await abort_invalid(context, err)
        started = time.perf_counter()
        lists = await self._on(collection, context, self.engine.tag_search(
            collection, list(request.queries), request.limit, filters, tuple(request.metadata_fields),
            of_request(request)))
        return common_pb2.LegSearchResponse(engine=f"{self.engine.store.name} tags", lists=lists,
                                            timings_ms={"engine": (time.perf_counter() - started) * 1000})

    async def Neighbours(self, request: vector_pb2.NeighboursRequest, context) -> common_pb2.LegSearchResponse:
        try:
            collection, filters, seeds = check_neighbours(request)
            fields = check_metadata_fields(request.metadata_fields)
        except InvalidArgument as err:
            await abort_invalid(context, err)
        timings: dict[str, float] = {}
        ranked_list = await self._on(collection, context, self.engine.neighbours(
            collection, seeds, request.query, request.limit, filters, fields, timings, of_request(request)))
        return common_pb2.LegSearchResponse(engine=f"{self.engine.store.name} links", lists=[ranked_list],
                                            timings_ms=timings)

    async def CreateCollection(self, request: vector_pb2.CreateVectorCollectionRequest,
                               context) -> vector_pb2.CreateVectorCollectionResponse:
        """The collection, empty, for an embedder of its own (VectorEngine.create); through its gate, as a write."""
        try:
            collection = check_collection(request.collection)
        except InvalidArgument as err:
            await abort_invalid(context, err)
        created, space = await self._on(collection, context, self.engine.create(collection, request.embedder))
        return vector_pb2.CreateVectorCollectionResponse(created=created, embedder=space.embedder, dim=space.dim)


def check_neighbours(request: vector_pb2.NeighboursRequest) -> tuple[str, list, list[str]]:
    """(collection, filters, seeds) of a valid Neighbours request; raises InvalidArgument otherwise."""
    collection = check_collection(request.collection)
    filters = check_filters(request.filters)
    if not 0 < len(request.seeds) <= MAX_SEEDS:
        raise InvalidArgument(f"send 1-{MAX_SEEDS} seeds, got {len(request.seeds)}")
    seeds = check_doc_ids(request.seeds)
    if not request.query.text.strip() or len(request.query.text) > MAX_QUERY_CHARS:
        raise InvalidArgument(f"query.text must be 1-{MAX_QUERY_CHARS} characters")
    if not 0 < request.limit <= MAX_LEG_LIMIT:
        raise InvalidArgument(f"limit must be 1-{MAX_LEG_LIMIT}, got {request.limit}")
    return collection, filters, seeds


async def main() -> None:
    settings = get_settings()
    engine = VectorEngine(settings)

    async def register(server: grpc.aio.Server) -> list[str]:
        bm25 = bm25_pb2_grpc.Bm25ServiceStub(internal_channel(settings.endpoints.addr("bm25")))
        vector_pb2_grpc.add_VectorServiceServicer_to_server(VectorServicer(engine, bm25), server)
        return [vector_pb2.DESCRIPTOR.services_by_name["VectorService"].full_name]

    await serve("vector", settings.endpoints.vector_port, register, on_stop=engine.close)
