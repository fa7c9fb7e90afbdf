"""The vector store on qdrant-client: a Qdrant server (`url`), or its embedded local mode (`path`, exact search,
on disk; `location=":memory:"` in tests). One code path for both; what every Qdrant engine shares is
ChunkPointStore (vector/store.py) over vector/points.py."""

from __future__ import annotations

import asyncio
from pathlib import Path

import grpc
import numpy as np
from qdrant_client import AsyncQdrantClient, models

from hybridsearch.config.stores import VectorSettings
from hybridsearch.contract.validation import is_collection_name
from hybridsearch.contract.errors import Refusal

from hybridsearch.v1 import common_pb2
from hybridsearch.vector.points import (
    SCROLL_PAGE,
    UPSERT_BATCH,
    VectorSpace,
    collection_config,
    payload_indexes,
    qdrant_filter,
)
from hybridsearch.vector.store import ChunkPointStore


# Where a Qdrant collection keeps its VectorSpace: the collection's own metadata (Qdrant >= 1.16; local mode
# keeps it too), so a drop removes it with the collection.
SPACE_METADATA = "hybridsearch"


class QdrantStore(ChunkPointStore):
    """qdrant-client: path (local mode, on disk), location=":memory:" (local mode, in memory), url (server).

    Local mode keeps collections of any embedder side by side. A server keeps the default embedder's only
    (check_embedder): collections of other embedders on a server are not wired (no Qdrant server runs where
    this project is tested), so they are refused rather than left untried.
    """

    def __init__(self, *, path: Path | None = None, url: str | None = None, location: str | None = None,
                 dim: int = 384, settings: VectorSettings | None = None) -> None:
        super().__init__(settings, dim)
        if path is not None:
            path.mkdir(parents=True, exist_ok=True)
            self.client = AsyncQdrantClient(path=str(path))
            self.name = "qdrant-local"
        elif location is not None:
            self.client = AsyncQdrantClient(location=location)
            self.name = "qdrant-local"
        else:
            api_key = self.cfg.qdrant_api_key.get_secret_value() if self.cfg.qdrant_api_key else None
            self.client = AsyncQdrantClient(url=url, grpc_port=self.cfg.qdrant_grpc_port, prefer_grpc=True,
                                            api_key=api_key, timeout=self.cfg.qdrant_timeout_s)
            self.name = "qdrant-server"
        self.server = path is None and location is None
        self._known: set[str] = set()
        self._spaces: dict[str, VectorSpace] = {}
        self._ensure_lock = asyncio.Lock()  # two first writes must not both create the collection

    def check_embedder(self, embedder: str) -> None:
        if self.server and embedder != self.default_space.embedder:
            raise Refusal(f"{self.name}: one embedder per deployment on the qdrant server engine "
                          f"({self.default_space.embedder}); a collection of {embedder} needs vector.engine "
                          "embedded or local", grpc.StatusCode.FAILED_PRECONDITION)

    async def create(self, collection: str, space: VectorSpace) -> VectorSpace:
        if collection in self._known:
            return await self.space_of(collection)
        async with self._ensure_lock:
            if collection not in self._known:
                if not await self.client.collection_exists(collection):
                    await self.client.create_collection(collection, **collection_config(self.cfg, space.dim),
                                                        metadata={SPACE_METADATA: vars(space)})
                    self._spaces[collection] = space
                # Also on existing collections, so a field added to indexed_fields gets its index; re-creating
                # an index Qdrant already has is a no-op.
                for field, schema in payload_indexes(self.cfg).items():
                    await self.client.create_payload_index(collection, field, field_schema=schema, wait=True)
                self._known.add(collection)
        return await self.space_of(collection)

    async def space_of(self, collection: str) -> VectorSpace | None:
        if (space := self._spaces.get(collection)) is not None:
            return space
        if not await self.exists(collection):
            return None
        recorded = ((await self.client.get_collection(collection)).config.metadata or {}).get(SPACE_METADATA)
        space = self._spaces[collection] = VectorSpace(**recorded) if recorded else self.default_space
        return space

    async def exists(self, collection: str) -> bool:
        return collection in self._known or await self.client.collection_exists(collection)

    async def collections(self) -> list[str]:
        """The Qdrant collections named as collections of ours (a shared server may hold others)."""
        listed = (await self.client.get_collections()).collections
        return sorted(c.name for c in listed if is_collection_name(c.name))

    async def drop(self, collection: str) -> bool:
        async with self._ensure_lock:
            self._known.discard(collection)
            self._spaces.pop(collection, None)
            if not await self.client.collection_exists(collection):
                return False
            await self.client.delete_collection(collection)
            return True

    async def _payloads(self, collection: str, ids: list[str], fields: list[str]) -> list[dict]:
        if not await self.exists(collection):
            return []
        return [p.payload for p in await self.client.retrieve(collection, ids=ids, with_payload=fields)]

    async def _all_payloads(self, collection: str, fields: list[str]) -> list[dict]:
        if not await self.exists(collection):
            return []
        out, offset = [], None
        while True:
            points, offset = await self.client.scroll(collection, limit=SCROLL_PAGE, offset=offset, with_payload=fields,
                                                      with_vectors=False)
            out += [p.payload for p in points]
            if offset is None:
                return out

    async def _replace(self, collection: str, ids: list[str], vectors: np.ndarray, payloads: list[dict],
                       stale: list[str]) -> None:
        points = [models.PointStruct(id=i, vector=v.tolist(), payload=p)
                  for i, v, p in zip(ids, vectors, payloads)]
        for start in range(0, len(points), UPSERT_BATCH):
            await self.client.upsert(collection, points[start : start + UPSERT_BATCH], wait=True)
        if stale:
            await self._delete_points(collection, stale)

    async def _delete_points(self, collection: str, ids: list[str]) -> None:
        await self.client.delete(collection, points_selector=models.PointIdsList(points=ids), wait=True)

    async def _set_payloads(self, collection: str, updates: list[tuple[str, dict]]) -> None:
        for point, payload in updates:
            await self.client.set_payload(collection, payload=payload, points=[point], wait=True)

    async def _count(self, collection: str, flt: models.Filter | None) -> int:
        return (await self.client.count(collection, count_filter=flt, exact=True)).count

    async def _matching(self, collection: str, flt: models.Filter, limit: int, fields: list[str]) -> list[dict]:
        points, _ = await self.client.scroll(collection, scroll_filter=flt, limit=limit, with_payload=fields,
                                             with_vectors=False)
        return [p.payload for p in points]

    async def search(self, collection: str, vectors: np.ndarray, limit: int, filters, with_vectors: bool = False,
                     within: list[str] | None = None, readers: common_pb2.Readers | None = None):
        """One list of ScoredPoint per query vector (only documents `within`, and only what `readers` may read,
        when given)."""
        if not await self.exists(collection):
            return [[] for _ in vectors]
        flt = qdrant_filter(filters, within, readers)
        params = await self.params_of(collection)
        requests = [
            models.QueryRequest(query=v.tolist(), limit=limit, filter=flt, params=params,
                                with_payload=True, with_vector=with_vectors)
            for v in vectors
        ]
        responses = await self.client.query_batch_points(collection, requests)
        return [r.points for r in responses]

    async def close(self) -> None:
        await self.client.close()
