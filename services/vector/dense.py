"""The vector leg's engine: each collection's embedder (passages, the query encoder and its vector cache) and
its store (qdrant-edge, a Qdrant server, or local mode) behind one DenseEngine; searches, tag and Rocchio
lists, neighbours and writes, with the hits they make. VectorService (vector/service.py) serves it."""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass

import grpc
import numpy as np

from hybridsearch.text.chunking import indexed_text
from hybridsearch.config.settings import Settings
from hybridsearch.config.collections import collection_config
from hybridsearch.storage.stores import BuiltHits, UpsertResult, leg_hit
from hybridsearch.text.tags import query_keywords
from hybridsearch.runtime.models import ModelUnavailable
from hybridsearch.contract.errors import InvalidArgument, Refusal
from hybridsearch.v1 import common_pb2
from hybridsearch.vector.embedder import EMBEDDERS, EmbeddingCache, QueryEncoder, open_embedder
from hybridsearch.vector.edge import EdgeStore
from hybridsearch.vector.neighbours import EdgeWeights, ranked, strongest
from hybridsearch.vector.query_cache import QueryVectorCache
from hybridsearch.vector.qdrant import QdrantStore
from hybridsearch.vector.store import ChunkPointStore
from hybridsearch.vector.points import NEIGHBOUR_CHUNKS, VectorSpace

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Embedder:
    """One embedder's models in this process: passages (through the on-disk cache when it is on), the query
    encoder, and the query vector cache in front of it (its key names the encoder: no vector of another
    embedder ever answers)."""

    name: str
    dim: int
    passages: object  # OnnxEmbedder's interface: embed(texts) -> vectors
    encoder: QueryEncoder
    queries: QueryVectorCache

    async def close(self) -> None:
        await self.queries.close()
        self.encoder.close()


class VectorEngine:
    """Embedders + store (a DenseEngine); what StoreServicerMixin and Search call.

    Every call on a collection embeds with the collection's own embedder, as its store records it (the
    store keeps it in memory once read, and forgets it when the collection is dropped; a restored one is
    read anew). The embedders are opened on first use, each once for the process (the default one at start,
    so a deployment whose model is missing fails there as before); the searches and writes of a collection
    whose embedder cannot be opened here are refused (FAILED_PRECONDITION), the other collections served.
    """

    def __init__(self, settings: Settings) -> None:
        cfg = settings.vector
        self.settings = settings
        default = self._embedder_of_models(cfg.embedder, *self._open_models(cfg.embedder))
        self._embedders: dict[str, Embedder] = {cfg.embedder: default}
        self._opening: dict[str, asyncio.Task] = {}  # embedder name -> its open in flight
        self._creating = asyncio.Lock()  # CreateCollection's look-then-create, one at a time
        self.store: ChunkPointStore
        # Hits built once per cached payload (storage.stores.BuiltHits): where the store keeps payloads, none else.
        self.built: BuiltHits | None = None
        if cfg.engine == "embedded":  # Qdrant's engine in-process: HNSW, payload indexes (vector/edge.py)
            self.store = EdgeStore(path=settings.data_dir / "qdrant-edge", dim=default.dim, settings=cfg)
            if cfg.payload_cache:
                self.built = BuiltHits(2 * cfg.payload_cache, lambda p, fields, content: leg_hit(p, 0.0, 0, fields, content))
        elif cfg.engine == "local":  # qdrant-client's local mode: exact scan in Python, for small collections
            self.store = QdrantStore(path=settings.data_dir / "qdrant", dim=default.dim, settings=cfg)
        elif cfg.engine == "qdrant":
            self.store = QdrantStore(url=cfg.qdrant_url, dim=default.dim, settings=cfg)
        else:
            raise ValueError(f"unknown vector engine {cfg.engine!r} (embedded | local | qdrant)")
        self.feedback_weight = cfg.feedback_weight
        self.name = f"{self.store.name}+{default.name}"

    def _open_models(self, name: str) -> tuple[object, QueryEncoder]:
        """The passage embedder (through the on-disk cache when it is on) and the query encoder of `name`;
        ModelUnavailable when its files are not installed. Blocking (models load)."""
        cfg = self.settings.vector
        embedder = open_embedder(name, cfg.max_seq_length, cfg.batch_size)
        cache = self.settings.data_dir / "cache" / "embeddings.sqlite"
        passages = EmbeddingCache(cache, embedder, cfg.max_seq_length) if cfg.embedding_cache else embedder
        return passages, QueryEncoder(name, cfg.max_seq_length)

    def _embedder_of_models(self, name: str, passages, encoder: QueryEncoder) -> Embedder:
        # Queries repeat (pages, retries, dashboards, one query over several collections, variants that
        # repeat the query): their vectors are kept in memory and in Redis (vector/query_cache.py).
        queries = QueryVectorCache.from_settings(self.settings, encoder)
        return Embedder(name, encoder.dim, passages, encoder, queries)

    async def _embedder(self, name: str) -> Embedder:
        """The named embedder, opened on first use. Opening is a task of its own, run to its end whoever waits
        for it (as EdgeStore opens shards): a search cancelled by its deadline leaves the models loading, and
        the next call finds them. ModelUnavailable when they cannot be opened (tried again by the next call:
        installing a model needs no restart)."""
        if (embedder := self._embedders.get(name)) is not None:
            return embedder
        if (opening := self._opening.get(name)) is None:
            opening = self._opening[name] = asyncio.create_task(self._open(name))
            opening.add_done_callback(lambda task: self._opened(name, task))
        return await asyncio.shield(opening)

    async def _open(self, name: str) -> Embedder:
        passages, encoder = await asyncio.to_thread(self._open_models, name)
        embedder = self._embedders[name] = self._embedder_of_models(name, passages, encoder)
        return embedder

    def _opened(self, name: str, task: asyncio.Task) -> None:
        if self._opening.get(name) is task:
            del self._opening[name]
        if not task.cancelled() and (err := task.exception()) is not None:  # retrieved: every waiter may be gone
            log.warning("embedder %s could not be opened: %s", name, err)

    async def _collection_embedder(self, collection: str) -> Embedder:
        """The embedder of the collection's vectors (the default for a collection the store does not hold);
        a Refusal (FAILED_PRECONDITION) when it cannot be opened here."""
        space = await self.store.space_of(collection)
        name = space.embedder if space is not None else self.settings.vector.embedder
        try:
            return await self._embedder(name)
        except ModelUnavailable as err:
            raise Refusal(f"collection {collection!r} is embedded with {name}, which this vector service cannot "
                          f"open: {err}", grpc.StatusCode.FAILED_PRECONDITION) from err

    async def create(self, collection: str, embedder: str) -> tuple[bool, VectorSpace]:
        """The collection created empty for `embedder` (empty: the default) unless the store holds it:
        (created, its space)."""
        name = embedder or self.settings.vector.embedder
        if name not in EMBEDDERS:
            raise InvalidArgument(f"unknown embedder {name!r}: choose one of {', '.join(EMBEDDERS)}")
        self.store.check_embedder(name)
        async with self._creating:  # no other create between the look and the create (a write may create it)
            space = held = await self.store.space_of(collection)
            if held is None:
                try:
                    opened = await self._embedder(name)
                except ModelUnavailable as err:
                    raise Refusal(str(err), grpc.StatusCode.FAILED_PRECONDITION) from err
                space = await self.store.create(collection, VectorSpace(name, opened.dim))
        if space.embedder != name:
            raise Refusal(f"collection {collection!r} exists with embedder {space.embedder}, not {name}: drop it "
                          "first, or create another collection", grpc.StatusCode.ALREADY_EXISTS)
        return held is None, space

    async def embed_queries(self, embedder: Embedder, texts: list[str], timings: dict[str, float]) -> np.ndarray:
        """Query vectors through the embedder's query cache; `timings` gets `embed` (waiting for the model: 0
        when every vector was cached) and, with a cache level on, `embed_cache` (the lookups)."""
        got = await embedder.queries.embed(texts)
        timings["embed"] = got.model_ms
        if embedder.queries.caching:
            timings["embed_cache"] = got.cache_ms
        return got.vectors

    async def upsert(self, collection: str, chunks: list[common_pb2.Chunk]) -> UpsertResult:
        # A collection a write creates has the default embedder (changed_documents creates it).
        changed, unchanged = await self.store.changed_documents(collection, chunks)
        todo = [c for c in chunks if c.doc_id in set(changed)]
        result = UpsertResult(documents_unchanged=unchanged)
        if unchanged:  # the same content, perhaps new readers: their payloads rewritten, nothing embedded
            relabelled = await self.store.set_readers(collection, [c for c in chunks if c.doc_id not in set(changed)])
            result.documents_unchanged -= relabelled.documents_written
            result.documents_written, result.chunks_written = relabelled.documents_written, relabelled.chunks_written
        if todo:
            embedder = await self._collection_embedder(collection)
            texts = [indexed_text(c.title, c.heading, c.text) for c in todo]
            vectors = await asyncio.to_thread(embedder.passages.embed, texts)
            config = collection_config(self.settings, collection)
            written = await self.store.write(collection, todo, vectors, config.tags_field, config.links_field)
            result.documents_written += written.documents_written
            result.chunks_written += written.chunks_written
        return result

    async def reseal(self, collection, chunks, expected):
        """Payloads rewritten, vectors kept: a reseal changes no indexed text, so nothing is embedded again."""
        return await self.store.reseal(collection, chunks, expected, collection_config(self.settings, collection).tags_field)

    async def delete(self, collection, doc_ids):
        return await self.store.delete(collection, doc_ids)

    async def stats(self, collection, readers=None):
        stats = await self.store.stats(collection, readers)
        space = await self.store.space_of(collection)
        stats.details["embedder"] = space.embedder if space is not None else self.settings.vector.embedder
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

    async def verify_restorable(self, folder):
        """The part is the store's files, checked piece by piece as they were read: nothing else to check."""

    async def install(self, collection, folder):
        await self.store.install(collection, folder)

    async def search(self, collection: str, queries: list[common_pb2.LegQuery], limit: int, filters,
                     feedback_docs: int = 0, timings: dict[str, float] | None = None,
                     metadata_fields: tuple[str, ...] = (), text_depth: int = 0,
                     readers: common_pb2.Readers | None = None) -> list[common_pb2.RankedList]:
        """Ranked lists, one per query (+ Rocchio's); `timings` gets embed (embed_cache) and engine milliseconds.
        Hits ranked below `text_depth` (> 0) come without title and text (LegSearchRequest.text_depth). With
        `readers`, only what they may read is searched (Rocchio's centroid too: it is made of those hits)."""
        timings = {} if timings is None else timings
        embedder = await self._collection_embedder(collection)
        vectors = await self.embed_queries(embedder, [q.text for q in queries], timings)
        embedded = time.perf_counter()
        results = await self.store.search(collection, vectors, limit, filters, with_vectors=feedback_docs > 0,
                                          readers=readers)
        lists = [self._ranked(q.kind, q.text, points, metadata_fields, text_depth, self.built)
                 for q, points in zip(queries, results)]
        if feedback_docs > 0 and results and results[0]:
            # Rocchio: move the original query toward the centroid of its top hits.
            top = np.array([p.vector for p in results[0][:feedback_docs]], dtype=np.float32)
            fb = vectors[0] + self.feedback_weight * top.mean(axis=0)
            fb /= np.linalg.norm(fb) or 1.0
            (fb_points,) = await self.store.search(collection, fb[None, :], limit, filters, readers=readers)
            lists.append(self._ranked(common_pb2.QUERY_KIND_FEEDBACK, f"rocchio({feedback_docs})", fb_points,
                                      metadata_fields, text_depth, self.built))
        timings["engine"] = (time.perf_counter() - embedded) * 1000
        return lists

    async def tag_search(self, collection: str, queries: list[common_pb2.LegQuery], limit: int, filters,
                         metadata_fields: tuple[str, ...] = (),
                         readers: common_pb2.Readers | None = None) -> list[common_pb2.RankedList]:
        """The tag leg: one LEG_TAG list per query, chunks whose tags the query's keywords name exactly,
        scored by how many (a keyword payload index, match-any: no embedding)."""
        lists = []
        for q in queries:
            found = await self.store.tag_search(collection, query_keywords(q.text), limit, filters, readers)
            lists.append(common_pb2.RankedList(leg=common_pb2.LEG_TAG, kind=q.kind, query=q.text, hits=[
                leg_hit(payload, float(count), r + 1, metadata_fields) for r, (payload, count) in enumerate(found)]))
        return lists

    async def neighbours(self, collection: str, seeds: list[str], query: common_pb2.LegQuery, limit: int, filters,
                         metadata_fields: tuple[str, ...] = (), timings: dict[str, float] | None = None,
                         readers: common_pb2.Readers | None = None) -> common_pb2.RankedList:
        """Link expansion: the seeds' one-hop neighbours (vector/neighbours.py) that pass the filters, each
        by its best chunk for the query, scored similarity x edge weight; one LEG_GRAPH list."""
        timings = {} if timings is None else timings
        started = time.perf_counter()
        cfg = self.settings.graph
        edges = await self.store.link_edges(collection, seeds, EdgeWeights.of(cfg), readers)
        timings["links"] = (time.perf_counter() - started) * 1000
        out = common_pb2.RankedList(leg=common_pb2.LEG_GRAPH, kind=query.kind, query=query.text)
        if not edges:
            return out
        embedder = await self._collection_embedder(collection)
        vectors = await self.embed_queries(embedder, [query.text], timings)
        searched = time.perf_counter()
        (points,) = await self.store.search(collection, vectors, NEIGHBOUR_CHUNKS, filters,
                                            within=strongest(edges, cfg.candidates), readers=readers)
        timings["engine"] = (time.perf_counter() - searched) * 1000
        best = ranked(((p.payload, float(p.score)) for p in points), edges, limit)
        out.hits.extend(leg_hit(payload, score, r + 1, metadata_fields) for r, (payload, score) in enumerate(best))
        return out

    @staticmethod
    def _ranked(kind, text, points, metadata_fields=(), text_depth: int = 0,
                built: BuiltHits | None = None) -> common_pb2.RankedList:
        """A LEG_VECTOR list; hits ranked below `text_depth` (> 0) without their content: building them with
        it for trim_texts to clear again cost ~10% of a search's CPU outside the embedding. With `built` (the
        payload cache on), each hit copied from the one built for its payload before."""
        depth = text_depth or len(points)
        if built is None:
            return common_pb2.RankedList(
                leg=common_pb2.LEG_VECTOR, kind=kind, query=text,
                hits=[leg_hit(p.payload, float(p.score), r + 1, metadata_fields, r < depth) for r, p in enumerate(points)])
        out = common_pb2.RankedList(leg=common_pb2.LEG_VECTOR, kind=kind, query=text)
        fields = tuple(metadata_fields)
        for r, p in enumerate(points):
            built.add(out, p.payload, float(p.score), r + 1, fields, r < depth)
        return out

    async def close(self):
        for embedder in self._embedders.values():
            await embedder.close()
        await self.store.close()
