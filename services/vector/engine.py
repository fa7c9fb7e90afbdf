"""The interface between the vector service and its engine (embedders + store: qdrant-edge, Qdrant; each
collection embedded by its own), the same shape as the BM25 service's (bm25.engine.LexicalEngine)."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from hybridsearch.storage.stores import EngineStats, UpsertResult
from hybridsearch.v1 import common_pb2
from hybridsearch.vector.points import VectorSpace


class DenseEngine(Protocol):
    """A vector engine. Chunks of one document are always replaced together."""

    name: str
    store: object  # the chunk store (its `name` is the engine's in the tag leg's status)

    async def create(self, collection: str, embedder: str) -> tuple[bool, VectorSpace]:
        """The collection, empty, for vectors of `embedder` (empty: the default), its embedder recorded:
        (created, its space). A Refusal: an unknown embedder, one whose model is not installed, or an existing
        collection of another embedder (ALREADY_EXISTS)."""
        ...

    async def upsert(self, collection: str, chunks: list[common_pb2.Chunk]) -> UpsertResult: ...

    async def delete(self, collection: str, doc_ids: list[str]) -> tuple[int, int]:
        """Returns (documents deleted, chunks deleted)."""
        ...

    async def search(self, collection: str, queries: list[common_pb2.LegQuery], limit: int,
                     filters: list[common_pb2.MetadataFilter], feedback_docs: int = 0,
                     timings: dict[str, float] | None = None,
                     metadata_fields: tuple[str, ...] = (), text_depth: int = 0,
                     readers: common_pb2.Readers | None = None) -> list[common_pb2.RankedList]:
        """One ranked list per query (+ Rocchio's with feedback_docs); `timings` gets the parts' ms. Hits
        ranked below `text_depth` (> 0) may come without title and text. `readers` (not None): only documents
        they may read are searched, inside the engine's filter (security/acl.py)."""
        ...

    async def tag_search(self, collection: str, queries: list[common_pb2.LegQuery], limit: int,
                         filters: list[common_pb2.MetadataFilter],
                         metadata_fields: tuple[str, ...] = (),
                         readers: common_pb2.Readers | None = None) -> list[common_pb2.RankedList]:
        """One LEG_TAG list per query: exact tag matches, by matched tag count (of what `readers` may read)."""
        ...

    async def neighbours(self, collection: str, seeds: list[str], query: common_pb2.LegQuery, limit: int,
                         filters: list[common_pb2.MetadataFilter], metadata_fields: tuple[str, ...] = (),
                         timings: dict[str, float] | None = None,
                         readers: common_pb2.Readers | None = None) -> common_pb2.RankedList:
        """Link expansion: one LEG_GRAPH list, the seeds' one-hop neighbours by similarity x edge weight (the
        links, seeds and neighbours only of what `readers` may read)."""
        ...

    async def stats(self, collection: str, readers: common_pb2.Readers | None = None) -> EngineStats:
        """Counts (of what `readers` may read, when given) and details."""
        ...

    async def content_hashes(self, collection: str, doc_ids: list[str]) -> dict[str, str]: ...

    async def list_documents(self, collection: str) -> list[common_pb2.StoredDocument]: ...

    async def get_chunks(self, collection: str, doc_ids: list[str]) -> list[common_pb2.Chunk]: ...

    async def collections(self) -> list[str]:
        """The names of the collections the engine holds (a write created them), sorted."""
        ...

    async def drop(self, collection: str) -> bool:
        """Removes the collection and everything of it; False when it held none (idempotent)."""
        ...

    async def capture(self, collection: str, folder: Path) -> bool:
        """The collection's files as they stand, copied (or linked, where they never change) into `folder`, a
        new folder on the engine's disk; False when it holds no such collection. Snapshots (hybridsearch.snapshots)."""
        ...

    async def verify_restorable(self, folder: Path) -> None:
        """`folder` (a snapshot part read back) is restorable here: SnapshotMissing when the data it names is held
        elsewhere and gone (OpenSearch: the cluster's snapshot); an engine whose part is its files checks nothing."""
        ...

    async def install(self, collection: str, folder: Path) -> None:
        """`folder` (what `capture` made, read back) becomes the collection; CollectionExists when it exists."""
        ...

    async def close(self) -> None: ...
