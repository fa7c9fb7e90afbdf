"""Bm25Service: validates requests and hands them to the configured LexicalEngine.

Languages per collection: a collection is analyzed in its declared language (`declared_language`) unless
CreateCollection created it with another, recorded with its data (the embedded tantivy engine; the others
keep the declared one): a re-index builds a generation collection (`notes.g2`) analyzed in another language
beside the serving one, in this same process.
"""

from __future__ import annotations

import time
from functools import partial

import grpc

from hybridsearch.bm25.engine import LexicalEngine
from hybridsearch.config.collections import collection_config
from hybridsearch.config.settings import Settings, get_settings
from hybridsearch.runtime.server import serve
from hybridsearch.storage.store_servicer import StoreServicerMixin, StoreSnapshotsMixin, check_leg_search, trim_texts
from hybridsearch.contract.limits import MAX_QUERY_CHARS
from hybridsearch.contract.validation import check_collection
from hybridsearch.contract.errors import InvalidArgument, abort_invalid
from hybridsearch.security.acl import of_request
from hybridsearch.v1 import bm25_pb2, bm25_pb2_grpc, common_pb2


def declared_fields(settings: Settings, collection: str) -> dict[str, float]:
    """A collection's declared BM25 text fields (metadata key -> boost)."""
    return collection_config(settings, collection).fields


def declared_language(settings: Settings, collection: str) -> str:
    """A collection's BM25 analysis language (en, de, ..., auto)."""
    return collection_config(settings, collection).language


def declared_hashed(settings: Settings, collection: str) -> bool:
    """Whether a collection's terms come as keyed hashes (sealed_terms: hashed): indexed as they come."""
    return collection_config(settings, collection).hashed_terms


def build_engine(settings: Settings) -> LexicalEngine:
    cfg = settings.bm25
    language_of = partial(declared_language, settings)
    fields_of = partial(declared_fields, settings)
    if cfg.engine == "embedded":
        from hybridsearch.bm25.tantivy_engine import TantivyBm25Engine

        return TantivyBm25Engine(settings.data_dir / "bm25-tantivy", cfg.stemmer, cfg.stopwords, cfg.title_boost,
                                 language_of=language_of, fields_of=fields_of,
                                 hashed_of=partial(declared_hashed, settings), payload_cache=cfg.payload_cache)
    if cfg.engine == "bm25s":
        with_fields = sorted(name for name, c in settings.collections.items() if c.fields)
        if with_fields:
            raise ValueError(f"bm25.engine=bm25s does not index text fields, but collections {with_fields} declare "
                             "some (CollectionConfig.fields): use bm25.engine=embedded (tantivy) or opensearch")
        from hybridsearch.bm25.embedded import EmbeddedBm25Engine

        return EmbeddedBm25Engine(settings.data_dir / "bm25", cfg.k1, cfg.b, cfg.stemmer, cfg.stopwords, cfg.title_boost,
                                  language_of=language_of)
    if cfg.engine == "opensearch":
        from hybridsearch.bm25.opensearch import OpenSearchBm25Engine
        from hybridsearch.bm25.opensearch_index import analysis_chain

        for name in settings.collections:  # refused at start, not at a collection's first write
            analysis_chain(cfg.stemmer, cfg.stopwords, language_of(name))

        return OpenSearchBm25Engine(
            cfg.opensearch_url, k1=cfg.k1, b=cfg.b, stemmer=cfg.stemmer, stopwords=cfg.stopwords,
            title_boost=cfg.title_boost, index_prefix=cfg.opensearch_index_prefix, shards=cfg.opensearch_shards,
            replicas=cfg.opensearch_replicas, timeout_s=cfg.opensearch_timeout_s,
            search_timeout_s=cfg.opensearch_search_timeout_s, bulk_chunk_size=cfg.opensearch_bulk_chunk_size,
            bulk_max_bytes=cfg.opensearch_bulk_max_bytes, bulk_in_flight=cfg.opensearch_bulk_in_flight,
            snapshot_repository=cfg.opensearch_snapshot_repository,
            language_of=language_of,
            fields_of=fields_of,
        )
    raise ValueError(f"unknown bm25 engine {cfg.engine!r} (embedded | bm25s | opensearch)")


class Bm25Servicer(StoreServicerMixin, StoreSnapshotsMixin, bm25_pb2_grpc.Bm25ServiceServicer):
    def __init__(self, engine: LexicalEngine) -> None:
        self.engine = engine

    async def Search(self, request: common_pb2.LegSearchRequest, context) -> common_pb2.LegSearchResponse:
        try:
            collection, filters = check_leg_search(request)
        except InvalidArgument as err:
            await abort_invalid(context, err)
        started = time.perf_counter()
        lists = await self._on(collection, context, self.engine.search(
            collection, [q.text for q in request.queries], request.limit, filters, tuple(request.metadata_fields),
            fuzzy=request.fuzzy, text_depth=request.text_depth, readers=of_request(request)))
        return common_pb2.LegSearchResponse(
            engine=self.engine.name, timings_ms={"engine": (time.perf_counter() - started) * 1000},
            lists=trim_texts([
                common_pb2.RankedList(leg=common_pb2.LEG_BM25, kind=q.kind, query=q.text, hits=hits)
                for q, hits in zip(request.queries, lists)
            ], request.text_depth),
        )

    async def CreateCollection(self, request: bm25_pb2.CreateBm25CollectionRequest,
                               context) -> bm25_pb2.CreateBm25CollectionResponse:
        """The collection, empty, analyzed in a language of its own (LexicalEngine.create); through its gate,
        as a write."""
        try:
            collection = check_collection(request.collection)
        except InvalidArgument as err:
            await abort_invalid(context, err)
        created, language = await self._on(collection, context, self.engine.create(collection, request.language))
        return bm25_pb2.CreateBm25CollectionResponse(created=created, language=language)

    async def Correct(self, request: bm25_pb2.CorrectRequest, context) -> bm25_pb2.CorrectResponse:
        try:
            collection = check_collection(request.collection)
            if len(request.query) > MAX_QUERY_CHARS:
                raise InvalidArgument(f"query is {len(request.query)} characters; the limit is {MAX_QUERY_CHARS}")
        except InvalidArgument as err:
            await abort_invalid(context, err)
        corrected = await self._on(collection, context,
                                   self.engine.correct(collection, request.query, of_request(request)))
        return bm25_pb2.CorrectResponse(query=corrected)


async def main() -> None:
    settings = get_settings()
    engine = build_engine(settings)

    async def register(server: grpc.aio.Server) -> list[str]:
        bm25_pb2_grpc.add_Bm25ServiceServicer_to_server(Bm25Servicer(engine), server)
        return [bm25_pb2.DESCRIPTOR.services_by_name["Bm25Service"].full_name]

    await serve("bm25", settings.endpoints.bm25_port, register, on_stop=engine.close)
