"""Chunks as points in a Qdrant engine, the behaviour every engine shares (ChunkPointStore): the server and local
modes (vector/qdrant.py) and the embedded qdrant-edge (vector/edge.py).

`AsyncQdrantClient(path=...)` is qdrant-client's embedded local mode (exact search, on disk);
`AsyncQdrantClient(url=..., prefer_grpc=True)` talks to a Qdrant server. Chunk payloads carry the
document id, text and metadata (under `meta.`), so filters and deletes work the same in both.

Collection and search settings (HNSW, payload indexes, scalar quantisation, shards, search-time ef)
come from VectorSettings through vector/points.py, and go to both modes unchanged: the embedded client
accepts them and searches exactly.

Each collection records its VectorSpace (the embedder that makes its vectors, and their dimension) with
its data when it is created: a collection can be embedded with another model than the deployment's
default (vector/service.py), and one written before collections recorded theirs has the default's.
"""

from __future__ import annotations

import asyncio
import math
import time
import warnings
from pathlib import Path

import numpy as np
from qdrant_client import models

from hybridsearch.config.stores import VectorSettings
from hybridsearch.config.settings import get_settings
from hybridsearch.vector.beam import REFRESH_S
from hybridsearch.storage.stores import (
    SnapshotsUnsupported,
    unchanged_since,
    LISTED_FIELDS,
    EngineStats,
    UpsertResult,
    chunk_from_payload,
    chunks_by_document,
    stored_documents,
)
from hybridsearch.security.acl import ALLOW, DENY, acl_payload, payload_readable, same_readers
from hybridsearch.v1 import common_pb2
from hybridsearch.vector.neighbours import KEYS, LINK_FIELDS, LINKS, WIKI, EdgeWeights, neighbour_edges

from hybridsearch.vector.points import (
    CHUNK_FIELDS,
    FIRST_CHUNKS,
    LINK_SCAN,
    TAGS,
    TAG_FIELDS,
    TAG_SCAN,
    VectorSpace,
    match_any,
    chunk_payload,
    document_point_ids,
    point_id,
    qdrant_filter,
    readers_filter,
    reseal_payload,
    search_params,
    tag_ranked,
)

# Local mode warns on every call that it keeps no payload indexes and searches exactly: known, by design.
warnings.filterwarnings("ignore", message="Payload indexes have no effect in the local Qdrant")
warnings.filterwarnings("ignore", message="Local mode performs exact")

class ChunkPointStore:
    """Chunks as Qdrant points keyed by (document, position): what every Qdrant engine shares.

    Subclasses supply the engine calls (`create`, `space_of`, `exists`, `search`, `close`, and the
    primitives `_payloads`, `_replace`, `_delete_points`, `_count`); replacing and deleting a document
    are lookups by point id on every engine, never filtered scans.

    `dim` is the default embedder's (settings.embedder): the space of a collection a write creates, and of
    one that has no record (created before collections recorded theirs).
    """

    name: str

    def __init__(self, settings: VectorSettings | None, dim: int) -> None:
        self.cfg = settings or get_settings().vector
        self.default_space = VectorSpace(self.cfg.embedder, dim)
        self._lock = asyncio.Lock()  # one writer at a time: a document's replace is read-then-write
        self._params: dict[str, tuple[float, models.SearchParams]] = {}  # collection -> (read at, its params)

    async def params_of(self, collection: str) -> models.SearchParams:
        """The collection's search settings, its beam from its size (read again after beam.REFRESH_S)."""
        read_at, params = self._params.get(collection, (-math.inf, None))
        if params is None or time.monotonic() - read_at > REFRESH_S:
            points = await self._count(collection, None) if self.cfg.hnsw_ef_by_size else 0
            params = search_params(self.cfg, points)
            self._params[collection] = (time.monotonic(), params)
        return params

    async def capture(self, collection: str, folder: Path) -> bool:
        raise SnapshotsUnsupported(f"{self.name}: snapshots of this store are not wired: a Qdrant server takes its "
                                   "own (POST /collections/<name>/snapshots); the embedded store (qdrant-edge) "
                                   "snapshots through hybridsearch")

    async def install(self, collection: str, folder: Path) -> None:
        await self.capture(collection, folder)

    def check_embedder(self, embedder: str) -> None:
        """A Refusal when this store cannot keep a collection of `embedder`'s vectors (every store here can)."""

    async def create(self, collection: str, space: VectorSpace) -> VectorSpace:
        """Creates the collection empty for vectors of `space`, recording it, unless the collection exists;
        the space the collection has (an existing collection's may be another)."""
        raise NotImplementedError

    async def space_of(self, collection: str) -> VectorSpace | None:
        """The collection's recorded space (the default one when it has no record); None when the store holds
        no such collection. Kept in memory once read."""
        raise NotImplementedError

    async def ensure_collection(self, collection: str) -> None:
        """The collection, created for the default embedder if the store holds none (a write's first)."""
        await self.create(collection, self.default_space)

    async def exists(self, collection: str) -> bool:
        raise NotImplementedError

    async def collections(self) -> list[str]:
        """The names of the collections the store holds, sorted."""
        raise NotImplementedError

    async def drop(self, collection: str) -> bool:
        """Removes the collection; False when the store held none."""
        raise NotImplementedError

    async def _payloads(self, collection: str, ids: list[str], fields: list[str]) -> list[dict]:
        """These fields of the points that exist (none when the collection does not)."""
        raise NotImplementedError

    async def _replace(self, collection: str, ids: list[str], vectors: np.ndarray, payloads: list[dict],
                       stale: list[str]) -> None:
        """Upserts these points, then deletes the stale ones (a document is never missing in between)."""
        raise NotImplementedError

    async def _delete_points(self, collection: str, ids: list[str]) -> None:
        raise NotImplementedError

    async def _set_payloads(self, collection: str, updates: list[tuple[str, dict]]) -> None:
        """Sets these payload fields of these points (the other fields and the vectors stay)."""
        raise NotImplementedError

    async def _count(self, collection: str, flt: models.Filter | None) -> int:
        raise NotImplementedError

    async def _matching(self, collection: str, flt: models.Filter, limit: int, fields: list[str]) -> list[dict]:
        """Payloads of up to `limit` points that pass `flt` (an indexed lookup, no vectors)."""
        raise NotImplementedError

    async def tag_search(self, collection: str, keywords: list[str], limit: int,
                         filters: list[common_pb2.MetadataFilter],
                         readers: common_pb2.Readers | None = None) -> list[tuple[dict, int]]:
        """(payload, matched tag count) of the chunks whose tags match any keyword, best first (of those `readers`
        may read, when given)."""
        if not keywords or not await self.exists(collection):
            return []
        flt = qdrant_filter(filters, readers=readers) or models.Filter()
        flt.must = [*(flt.must or []), models.FieldCondition(key=TAGS, match=models.MatchAny(any=keywords))]
        return tag_ranked(await self._matching(collection, flt, TAG_SCAN, TAG_FIELDS), keywords, limit)

    async def link_edges(self, collection: str, seeds: list[str], weights: EdgeWeights,
                         readers: common_pb2.Readers | None = None) -> dict[str, float]:
        """The seeds' one-hop neighbours -> edge weight (vector/neighbours.py): the seeds' chunks by point
        id, then two indexed lookups (documents owning the wiki keys involved; documents linking to a seed).
        With `readers`, only documents they may read are looked at: a key another document holds makes no wiki
        link ambiguous, and no seed of theirs reaches past what they read."""
        if not seeds or not await self.exists(collection):
            return {}
        heads = await self._heads(collection, seeds)
        seed_payloads = await self._payloads(collection, document_point_ids(heads), [*LINK_FIELDS, ALLOW, DENY])
        seed_keys = sorted({k for p in seed_payloads for k in p.get(KEYS, [])})
        named = sorted({k for p in seed_payloads for k in p.get(WIKI, [])} | set(seed_keys))
        if readers is not None:
            seed_payloads = [p for p in seed_payloads if payload_readable(readers, p)]
        within = [readers_filter(readers)] if readers is not None else []
        keyed = await self._matching(collection, models.Filter(must=[*within, match_any(KEYS, named)]), LINK_SCAN,
                                     ["doc_id", KEYS]) if named else []
        linking = [c for c in (match_any(LINKS, seeds), match_any(WIKI, seed_keys)) if c is not None]
        incoming = await self._matching(collection, models.Filter(should=linking, must=within or None), LINK_SCAN,
                                        LINK_FIELDS)
        edges = neighbour_edges(seeds, seed_payloads, keyed, incoming, weights)
        if readers is None:
            return edges
        # a seed's own links name documents by id: those the readers may not read are no candidates either
        targets = await self._heads(collection, list(edges), [ALLOW, DENY])
        return {d: w for d, w in edges.items() if d in targets and payload_readable(readers, targets[d])}

    async def _all_payloads(self, collection: str, fields: list[str]) -> list[dict]:
        """These fields of every point of the collection (reconcile lists a whole collection)."""
        raise NotImplementedError

    async def _details(self, collection: str) -> dict[str, str]:
        """Engine-specific lines for stats."""
        return {}

    async def _heads(self, collection: str, doc_ids: list[str], also: list[str] = ()) -> dict[str, dict]:
        """Payload of each document's first chunk (it carries the hash and the chunk count).

        Point ids derive from (document, position), so this is a lookup by id, not a filtered scan: writes
        stay O(batch) at any collection size.
        """
        if not doc_ids:
            return {}
        payloads = await self._payloads(collection, [point_id(d, 0) for d in doc_ids],
                                        ["doc_id", "content_hash", "chunks", *also])
        return {p["doc_id"]: p for p in payloads}

    async def content_hashes(self, collection: str, doc_ids: list[str]) -> dict[str, str]:
        return {d: head["content_hash"] for d, head in (await self._heads(collection, doc_ids)).items()}

    async def list_documents(self, collection: str) -> list[common_pb2.StoredDocument]:
        return stored_documents(await self._all_payloads(collection, LISTED_FIELDS))

    async def get_chunks(self, collection: str, doc_ids: list[str]) -> list[common_pb2.Chunk]:
        heads = await self._heads(collection, doc_ids)
        payloads = await self._payloads(collection, document_point_ids(heads), CHUNK_FIELDS)
        return sorted((chunk_from_payload(p) for p in payloads), key=lambda c: (c.doc_id, c.position))

    async def changed_documents(self, collection: str, chunks: list[common_pb2.Chunk]) -> tuple[list[str], int]:
        """Documents whose stored chunks differ from these (hash or count), and how many are unchanged."""
        await self.ensure_collection(collection)
        wanted: dict[str, tuple[str, int]] = {}
        for c in chunks:
            h, n = wanted.get(c.doc_id, (c.content_hash, 0))
            wanted[c.doc_id] = (h, n + 1)
        heads = await self._heads(collection, list(wanted))
        changed = [d for d, (h, n) in wanted.items()
                   if d not in heads or heads[d]["content_hash"] != h or heads[d].get("chunks") != n]
        return changed, len(wanted) - len(changed)

    async def write(self, collection: str, chunks: list[common_pb2.Chunk], vectors: np.ndarray,
                    tags_field: str = "tags", links_field: str = "links") -> UpsertResult:
        """Replaces the named documents' chunks with these."""
        counts = {doc_id: len(doc_chunks) for doc_id, doc_chunks in chunks_by_document(chunks).items()}
        ids = [point_id(c.doc_id, c.position) for c in chunks]
        payloads = [chunk_payload(c, counts[c.doc_id], tags_field, links_field) for c in chunks]
        async with self._lock:
            await self.ensure_collection(collection)
            old = document_point_ids(await self._heads(collection, list(counts)))
            new = set(ids)
            await self._replace(collection, ids, vectors, payloads, [i for i in old if i not in new])
        return UpsertResult(documents_written=len(counts), chunks_written=len(ids))

    async def set_readers(self, collection: str, chunks: list[common_pb2.Chunk]) -> UpsertResult:
        """Documents stored with these chunks' content (hash and count) but other readers get these readers: their
        payloads' ALLOW and DENY rewritten, vectors kept (a new acl embeds nothing). Others are left alone."""
        result = UpsertResult()
        async with self._lock:  # no write of these documents between the check and the update
            by_doc = chunks_by_document(chunks)
            heads = await self._heads(collection, list(by_doc), [ALLOW, DENY])
            updates = []
            for doc_id, doc_chunks in by_doc.items():
                head = heads.get(doc_id)
                if head is None or head.get("content_hash") != doc_chunks[0].content_hash or \
                        head.get("chunks") != len(doc_chunks) or same_readers(head, doc_chunks[0].acl):
                    continue
                updates += [(point_id(c.doc_id, c.position), {**acl_payload(c.acl), "written_at_ms": c.written_at_ms})
                            for c in doc_chunks]  # the write that changed them is the newer (reconcile)
                result.documents_written += 1
                result.chunks_written += len(doc_chunks)
            if updates:
                await self._set_payloads(collection, updates)
        return result

    async def reseal(self, collection: str, chunks: list[common_pb2.Chunk], expected: dict[str, str],
                     tags_field: str = "tags") -> UpsertResult:
        """Documents sealed again (`keys rotate`): the sealed record, hashed metadata and tags and content hash of
        each chunk replaced in its payload, the vector kept; a document written since it was read (its stored
        hash or chunk count is not the expected one) is left alone, counted unchanged."""
        result = UpsertResult()
        async with self._lock:  # no write of these documents between the check and the update
            by_doc = chunks_by_document(chunks)
            heads = await self._heads(collection, list(by_doc))
            updates = []
            for doc_id, doc_chunks in by_doc.items():
                head = heads.get(doc_id, {})
                if not unchanged_since(expected, doc_id, head.get("content_hash"), head.get("chunks", 0), len(doc_chunks)):
                    result.documents_unchanged += 1
                    continue
                updates += [(point_id(c.doc_id, c.position), reseal_payload(c, tags_field)) for c in doc_chunks]
                result.documents_written += 1
                result.chunks_written += len(doc_chunks)
            if updates:
                await self._set_payloads(collection, updates)
        return result

    async def delete(self, collection: str, doc_ids: list[str]) -> tuple[int, int]:
        async with self._lock:
            heads = await self._heads(collection, doc_ids)
            ids = document_point_ids(heads)
            if ids:
                await self._delete_points(collection, ids)
        return len(heads), len(ids)

    async def stats(self, collection: str, readers: common_pb2.Readers | None = None) -> EngineStats:
        """Counts (of what `readers` may read, when given) and the engine's details."""
        if not await self.exists(collection):
            return EngineStats(self.name, 0, 0)
        within = [readers_filter(readers)] if readers is not None else []
        chunks = await self._count(collection, models.Filter(must=within) if within else None)
        docs = await self._count(collection, models.Filter(must=[*within, *FIRST_CHUNKS.must]))
        space = await self.space_of(collection) or self.default_space
        return EngineStats(self.name, docs, chunks, {
            "distance": "cosine", "dim": str(space.dim), "hnsw_m": str(self.cfg.hnsw_m),
            "hnsw_ef": str((await self.params_of(collection)).hnsw_ef or "server default"),
            "quantization": self.cfg.quantization,
            **await self._details(collection),
        })
