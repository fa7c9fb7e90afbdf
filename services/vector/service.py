"""VectorService: embeds queries and chunks, searches Qdrant, optional Rocchio feedback.

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
import numpy as np

from hybridsearch.common.chunking import indexed_text
from hybridsearch.common.config import Settings, get_settings
from hybridsearch.common.server import internal_channel, serve
from hybridsearch.common.limits import MAX_LEG_LIMIT, MAX_QUERY_CHARS
from hybridsearch.common.store_servicer import StoreServicerMixin, StoreSnapshotsMixin, check_leg_search, check_metadata_fields, trim_texts
from hybridsearch.common.collections import collection_config
from hybridsearch.common.stores import UpsertResult, content_of, picked_metadata, span_of
from hybridsearch.common.tags import query_keywords
from hybridsearch.common.validation import InvalidArgument, abort_invalid, check_collection, check_doc_ids, check_filters
from hybridsearch.v1 import bm25_pb2, bm25_pb2_grpc, common_pb2, vector_pb2, vector_pb2_grpc
from hybridsearch.vector.embedder import EmbeddingCache, QueryEncoder, open_embedder
from hybridsearch.vector.edge import EdgeStore
from hybridsearch.vector.engine import DenseEngine
from hybridsearch.vector.neighbours import EdgeWeights, ranked, strongest
from hybridsearch.vector.query_cache import QueryVectorCache
from hybridsearch.vector.store import NEIGHBOUR_CHUNKS, ChunkPointStore, QdrantStore

MAX_SEEDS = 50


class VectorEngine:
    """Embedder + store (a DenseEngine); what StoreServicerMixin and Search call."""

    def __init__(self, settings: Settings) -> None:
        cfg = settings.vector
        embedder = open_embedder(cfg.embedder, cfg.max_seq_length, cfg.batch_size)
        self.query_encoder = QueryEncoder(cfg.embedder, cfg.max_seq_length)
        # Queries repeat (pages, retries, dashboards, one query over several collections, variants that
        # repeat the query): their vectors are kept in memory and in Redis (vector/query_cache.py).
        self.query_vectors = QueryVectorCache.from_settings(settings, self.query_encoder)
        # Passages go through the on-disk cache.
        self.embedder = (EmbeddingCache(settings.data_dir / "cache" / "embeddings.sqlite", embedder, cfg.max_seq_length)
                         if cfg.embedding_cache else embedder)
        self.store: ChunkPointStore
        if cfg.engine == "embedded":  # Qdrant's engine in-process: HNSW, payload indexes (vector/edge.py)
            self.store = EdgeStore(path=settings.data_dir / "qdrant-edge", dim=self.embedder.dim, settings=cfg)
        elif cfg.engine == "local":  # qdrant-client's local mode: exact scan in Python, for small collections
            self.store = QdrantStore(path=settings.data_dir / "qdrant", dim=self.embedder.dim, settings=cfg)
        elif cfg.engine == "qdrant":
            self.store = QdrantStore(url=cfg.qdrant_url, dim=self.embedder.dim, settings=cfg)
        else:
            raise ValueError(f"unknown vector engine {cfg.engine!r} (embedded | local | qdrant)")
        self.settings = settings
        self.feedback_weight = cfg.feedback_weight
        self.name = f"{self.store.name}+{self.embedder.name}"

    async def embed(self, texts: list[str]) -> np.ndarray:
        """Passage vectors (through the on-disk cache when it is on)."""
        return await asyncio.to_thread(self.embedder.embed, texts)

    async def embed_queries(self, texts: list[str], timings: dict[str, float]) -> np.ndarray:
        """Query vectors through the query cache; `timings` gets `embed` (waiting for the model: 0 when
        every vector was cached) and, with a cache level on, `embed_cache` (the lookups)."""
        got = await self.query_vectors.embed(texts)
        timings["embed"] = got.model_ms
        if self.query_vectors.caching:
            timings["embed_cache"] = got.cache_ms
        return got.vectors

    async def upsert(self, collection: str, chunks: list[common_pb2.Chunk]) -> UpsertResult:
        changed, unchanged = await self.store.changed_documents(collection, chunks)
        todo = [c for c in chunks if c.doc_id in set(changed)]
        result = UpsertResult(documents_unchanged=unchanged)
        if todo:
            vectors = await self.embed([indexed_text(c.title, c.heading, c.text) for c in todo])
            config = collection_config(self.settings, collection)
            written = await self.store.write(collection, todo, vectors, config.tags_field, config.links_field)
            result.documents_written, result.chunks_written = written.documents_written, written.chunks_written
        return result

    async def reseal(self, collection, chunks, expected):
        """Payloads rewritten, vectors kept: a reseal changes no indexed text, so nothing is embedded again."""
        return await self.store.reseal(collection, chunks, expected, collection_config(self.settings, collection).tags_field)

    async def delete(self, collection, doc_ids):
        return await self.store.delete(collection, doc_ids)

    async def stats(self, collection):
        stats = await self.store.stats(collection)
        stats.details["embedder"] = self.embedder.name
        return stats

    async def content_hashes(self, collection, doc_ids):
        return await self.store.content_hashes(collection, doc_ids)

    async def list_documents(self, collection):
        return await self.store.list_documents(collection)

    async def get_chunks(self, collection, doc_ids):
        return await self.store.get_chunks(collection, doc_ids)

    async def collections(self):
        return await self.store.collections()

    async def drop(self, collection):
        return await self.store.drop(collection)

    async def capture(self, collection, folder):
        return await self.store.capture(collection, folder)

    async def install(self, collection, folder):
        await self.store.install(collection, folder)

    async def search(self, collection: str, queries: list[common_pb2.LegQuery], limit: int, filters,
                     feedback_docs: int = 0, timings: dict[str, float] | None = None,
                     metadata_fields: tuple[str, ...] = (), text_depth: int = 0) -> list[common_pb2.RankedList]:
        """Ranked lists, one per query (+ Rocchio's); `timings` gets embed (embed_cache) and engine milliseconds.
        Hits ranked below `text_depth` (> 0) come without title and text (LegSearchRequest.text_depth)."""
        timings = {} if timings is None else timings
        vectors = await self.embed_queries([q.text for q in queries], timings)
        embedded = time.perf_counter()
        results = await self.store.search(collection, vectors, limit, filters, with_vectors=feedback_docs > 0)
        lists = [self._ranked(q.kind, q.text, points, metadata_fields, text_depth) for q, points in zip(queries, results)]
        if feedback_docs > 0 and results and results[0]:
            # Rocchio: move the original query toward the centroid of its top hits.
            top = np.array([p.vector for p in results[0][:feedback_docs]], dtype=np.float32)
            fb = vectors[0] + self.feedback_weight * top.mean(axis=0)
            fb /= np.linalg.norm(fb) or 1.0
            (fb_points,) = await self.store.search(collection, fb[None, :], limit, filters)
            lists.append(self._ranked(common_pb2.QUERY_KIND_FEEDBACK, f"rocchio({feedback_docs})", fb_points,
                                      metadata_fields, text_depth))
        timings["engine"] = (time.perf_counter() - embedded) * 1000
        return lists

    async def tag_search(self, collection: str, queries: list[common_pb2.LegQuery], limit: int, filters,
                         metadata_fields: tuple[str, ...] = ()) -> list[common_pb2.RankedList]:
        """The tag leg: one LEG_TAG list per query, chunks whose tags the query's keywords name exactly,
        scored by how many (a keyword payload index, match-any: no embedding)."""
        lists = []
        for q in queries:
            found = await self.store.tag_search(collection, query_keywords(q.text), limit, filters)
            lists.append(common_pb2.RankedList(leg=common_pb2.LEG_TAG, kind=q.kind, query=q.text, hits=[
                _hit(payload, float(count), r + 1, metadata_fields) for r, (payload, count) in enumerate(found)]))
        return lists

    async def neighbours(self, collection: str, seeds: list[str], query: common_pb2.LegQuery, limit: int, filters,
                         metadata_fields: tuple[str, ...] = (), timings: dict[str, float] | None = None
                         ) -> common_pb2.RankedList:
        """Link expansion: the seeds' one-hop neighbours (vector/neighbours.py) that pass the filters, each
        by its best chunk for the query, scored similarity x edge weight; one LEG_GRAPH list."""
        timings = {} if timings is None else timings
        started = time.perf_counter()
        cfg = self.settings.graph
        edges = await self.store.link_edges(collection, seeds, EdgeWeights.of(cfg))
        timings["links"] = (time.perf_counter() - started) * 1000
        out = common_pb2.RankedList(leg=common_pb2.LEG_GRAPH, kind=query.kind, query=query.text)
        if not edges:
            return out
        vectors = await self.embed_queries([query.text], timings)
        searched = time.perf_counter()
        (points,) = await self.store.search(collection, vectors, NEIGHBOUR_CHUNKS, filters,
                                            within=strongest(edges, cfg.candidates))
        timings["engine"] = (time.perf_counter() - searched) * 1000
        best = ranked(((p.payload, float(p.score)) for p in points), edges, limit)
        out.hits.extend(_hit(payload, score, r + 1, metadata_fields) for r, (payload, score) in enumerate(best))
        return out

    @staticmethod
    def _ranked(kind, text, points, metadata_fields=(), text_depth: int = 0) -> common_pb2.RankedList:
        """A LEG_VECTOR list; hits ranked below `text_depth` (> 0) without their content: building them with
        it for trim_texts to clear again cost ~10% of a search's CPU outside the embedding."""
        depth = text_depth or len(points)
        return common_pb2.RankedList(
            leg=common_pb2.LEG_VECTOR, kind=kind, query=text,
            hits=[_hit(p.payload, float(p.score), r + 1, metadata_fields, r < depth) for r, p in enumerate(points)],
        )

    async def close(self):
        await self.query_vectors.close()
        self.query_encoder.close()
        await self.store.close()


def _hit(payload: dict, score: float, rank: int, metadata_fields, content: bool = True) -> common_pb2.LegHit:
    """A hit from its stored payload; without `content`, its title, text and sealed record left out."""
    return common_pb2.LegHit(
        chunk_id=payload["chunk_id"], doc_id=payload["doc_id"], score=score, rank=rank,
        **(content_of(payload, heading=False) if content else {}),
        metadata=picked_metadata(payload.get("meta", {}), metadata_fields), span=span_of(payload),
    )


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

    async def _corrected(self, collection: str, queries: list[common_pb2.LegQuery],
                         context) -> list[common_pb2.LegQuery]:
        """The queries as the BM25 service corrects them (the original and the variants built on its words,
        at once); each one that cannot be corrected in time stays as typed."""
        remaining = context.time_remaining()
        timeout = min(CORRECT_TIMEOUT_S, remaining / 2) if remaining is not None else CORRECT_TIMEOUT_S

        async def corrected(q: common_pb2.LegQuery) -> common_pb2.LegQuery:
            if q.kind not in CORRECTED_KINDS:
                return q
            try:
                reply = await self.bm25.Correct(bm25_pb2.CorrectRequest(collection=collection, query=q.text),
                                                timeout=timeout)
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
            queries = await self._corrected(collection, queries, context)
            timings["correct"] = (time.perf_counter() - started) * 1000
        async with self.gates.using(collection):
            lists = await self.engine.search(collection, queries, request.limit, filters, request.feedback_docs,
                                             timings, tuple(request.metadata_fields), request.text_depth)
        return common_pb2.LegSearchResponse(engine=self.engine.name, lists=trim_texts(lists, request.text_depth),
                                            timings_ms=timings)

    async def TagSearch(self, request: common_pb2.LegSearchRequest, context) -> common_pb2.LegSearchResponse:
        try:
            collection, filters = check_leg_search(request)
        except InvalidArgument as err:
            await abort_invalid(context, err)
        started = time.perf_counter()
        async with self.gates.using(collection):
            lists = await self.engine.tag_search(collection, list(request.queries), request.limit, filters,
                                                 tuple(request.metadata_fields))
        return common_pb2.LegSearchResponse(engine=f"{self.engine.store.name} tags", lists=lists,
                                            timings_ms={"engine": (time.perf_counter() - started) * 1000})

    async def Neighbours(self, request: vector_pb2.NeighboursRequest, context) -> common_pb2.LegSearchResponse:
        try:
            collection, filters, seeds = check_neighbours(request)
            fields = check_metadata_fields(request.metadata_fields)
        except InvalidArgument as err:
            await abort_invalid(context, err)
        timings: dict[str, float] = {}
        async with self.gates.using(collection):
            ranked_list = await self.engine.neighbours(collection, seeds, request.query, request.limit, filters,
                                                       fields, timings)
        return common_pb2.LegSearchResponse(engine=f"{self.engine.store.name} links", lists=[ranked_list],
                                            timings_ms=timings)


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
