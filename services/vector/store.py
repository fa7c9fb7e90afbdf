"""Qdrant adapter for the vector leg, one code path for every deployment.

`AsyncQdrantClient(path=...)` is qdrant-client's embedded local mode (exact search, on disk);
`AsyncQdrantClient(url=..., prefer_grpc=True)` talks to a Qdrant server. Chunk payloads carry the
document id, text and metadata (under `meta.`), so filters and deletes work the same in both.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import numpy as np
from qdrant_client import AsyncQdrantClient, models

from hybridsearch.common.stores import EngineStats, UpsertResult
from hybridsearch.v1 import common_pb2

POINT_NAMESPACE = uuid.UUID("6f1c1a52-3f0e-4a55-9d7e-6a7c0b1f2e11")


def point_id(chunk_id: str) -> str:
    return str(uuid.uuid5(POINT_NAMESPACE, chunk_id))


def qdrant_filter(filters: list[common_pb2.MetadataFilter]) -> models.Filter | None:
    if not filters:
        return None
    must, must_not = [], []
    for f in filters:
        key = f"meta.{f.field}"
        which = f.WhichOneof("condition")
        if which == "equals":
            must.append(models.FieldCondition(key=key, match=models.MatchValue(value=f.equals)))
        elif which == "any_of":
            must.append(models.FieldCondition(key=key, match=models.MatchAny(any=list(f.any_of.values))))
        elif which == "not_equals":
            must_not.append(models.FieldCondition(key=key, match=models.MatchValue(value=f.not_equals)))
    return models.Filter(must=must or None, must_not=must_not or None)


def _doc_filter(doc_ids: list[str]) -> models.Filter:
    return models.Filter(must=[models.FieldCondition(key="doc_id", match=models.MatchAny(any=doc_ids))])


class QdrantStore:
    def __init__(self, *, path: Path | None = None, url: str | None = None, dim: int = 384) -> None:
        if path is not None:
            path.mkdir(parents=True, exist_ok=True)
            self.client = AsyncQdrantClient(path=str(path))
            self.name = "qdrant-embedded"
        else:
            self.client = AsyncQdrantClient(url=url, prefer_grpc=True)
            self.name = "qdrant-server"
        self.dim = dim
        self._known: set[str] = set()
        self._lock = asyncio.Lock()  # local mode is not safe for concurrent writers

    async def ensure_collection(self, collection: str) -> None:
        if collection in self._known:
            return
        if not await self.client.collection_exists(collection):
            await self.client.create_collection(
                collection,
                vectors_config=models.VectorParams(size=self.dim, distance=models.Distance.COSINE),
            )
        self._known.add(collection)

    async def exists(self, collection: str) -> bool:
        return collection in self._known or await self.client.collection_exists(collection)

    async def content_hashes(self, collection: str, doc_ids: list[str]) -> dict[str, str]:
        if not doc_ids or not await self.exists(collection):
            return {}
        out: dict[str, str] = {}
        offset = None
        while True:
            points, offset = await self.client.scroll(
                collection, scroll_filter=_doc_filter(doc_ids), limit=1024, offset=offset,
                with_payload=["doc_id", "content_hash"], with_vectors=False,
            )
            for p in points:
                out[p.payload["doc_id"]] = p.payload["content_hash"]
            if offset is None:
                return out

    async def _chunk_counts(self, collection: str, doc_ids: list[str]) -> dict[str, tuple[str, int]]:
        counts: dict[str, tuple[str, int]] = {}
        offset = None
        while True:
            points, offset = await self.client.scroll(
                collection, scroll_filter=_doc_filter(doc_ids), limit=1024, offset=offset,
                with_payload=["doc_id", "content_hash"], with_vectors=False,
            )
            for p in points:
                h, n = counts.get(p.payload["doc_id"], (p.payload["content_hash"], 0))
                counts[p.payload["doc_id"]] = (h if h == p.payload["content_hash"] else "", n + 1)
            if offset is None:
                return counts

    async def changed_documents(self, collection: str, chunks: list[common_pb2.Chunk]) -> tuple[list[str], int]:
        """Documents whose stored chunks differ from these (hash or count), and how many are unchanged."""
        await self.ensure_collection(collection)
        wanted: dict[str, tuple[str, int]] = {}
        for c in chunks:
            h, n = wanted.get(c.doc_id, (c.content_hash, 0))
            wanted[c.doc_id] = (h, n + 1)
        stored = await self._chunk_counts(collection, list(wanted))
        changed = [d for d, v in wanted.items() if stored.get(d) != v]
        return changed, len(wanted) - len(changed)

    async def write(self, collection: str, chunks: list[common_pb2.Chunk], vectors: np.ndarray) -> UpsertResult:
        """Replaces the named documents' chunks with these."""
        doc_ids = sorted({c.doc_id for c in chunks})
        async with self._lock:
            await self.ensure_collection(collection)
            if doc_ids:
                await self.client.delete(collection, points_selector=models.FilterSelector(filter=_doc_filter(doc_ids)), wait=True)
            points = [
                models.PointStruct(
                    id=point_id(c.chunk_id),
                    vector=v.tolist(),
                    payload={
                        "chunk_id": c.chunk_id, "doc_id": c.doc_id, "position": c.position, "title": c.title,
                        "heading": c.heading, "text": c.text, "content_hash": c.content_hash, "meta": dict(c.metadata),
                    },
                )
                for c, v in zip(chunks, vectors)
            ]
            for start in range(0, len(points), 512):
                await self.client.upsert(collection, points[start : start + 512], wait=True)
        return UpsertResult(documents_written=len(doc_ids), chunks_written=len(points))

    async def delete(self, collection: str, doc_ids: list[str]) -> tuple[int, int]:
        if not doc_ids or not await self.exists(collection):
            return 0, 0
        async with self._lock:
            counts = await self._chunk_counts(collection, doc_ids)
            if counts:
                await self.client.delete(collection, points_selector=models.FilterSelector(filter=_doc_filter(doc_ids)), wait=True)
        return len(counts), sum(n for _, n in counts.values())

    async def search(self, collection: str, vectors: np.ndarray, limit: int, filters, with_vectors: bool = False):
        """One list of ScoredPoint per query vector."""
        if not await self.exists(collection):
            return [[] for _ in vectors]
        flt = qdrant_filter(filters)
        requests = [
            models.QueryRequest(query=v.tolist(), limit=limit, filter=flt, with_payload=True, with_vector=with_vectors)
            for v in vectors
        ]
        responses = await self.client.query_batch_points(collection, requests)
        return [r.points for r in responses]

    async def stats(self, collection: str) -> EngineStats:
        if not await self.exists(collection):
            return EngineStats(self.name, 0, 0)
        chunks = (await self.client.count(collection, exact=True)).count
        docs = set()
        offset = None
        while True:
            points, offset = await self.client.scroll(collection, limit=4096, offset=offset, with_payload=["doc_id"], with_vectors=False)
            docs.update(p.payload["doc_id"] for p in points)
            if offset is None:
                break
        return EngineStats(self.name, len(docs), chunks, {"distance": "cosine", "dim": str(self.dim)})

    async def close(self) -> None:
        await self.client.close()
