"""The interface between the BM25 service and its engines (embedded, OpenSearch)."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

import grpc

from hybridsearch.text.language import check_collection_language
from hybridsearch.storage.stores import EngineStats, UpsertResult
from hybridsearch.contract.errors import InvalidArgument, Refusal
from hybridsearch.v1 import common_pb2

def field_name(key: str) -> str:
    """The index field of a declared text field (CollectionConfig.fields: a metadata key), on every engine."""
    return f"field_{key}"


def requested_language(language: str, declared: str) -> str:
    """A CreateCollection's language: `language` checked (one of text/language.py SUPPORTED, or auto;
    INVALID_ARGUMENT otherwise), the collection's `declared` one when empty."""
    if not language.strip():
        return declared
    try:
        return check_collection_language(language)
    except ValueError as err:
        raise InvalidArgument(str(err)) from err


def declared_only(engine: str, collection: str, language: str, declared: str) -> None:
    """An engine that analyzes every collection in its declared language refuses another one."""
    if language != declared:
        raise Refusal(f"{engine}: collection {collection!r} is analyzed in its declared language {declared!r}, not "
                      f"{language!r}: per-collection analysis languages need bm25.engine=embedded",
                      grpc.StatusCode.FAILED_PRECONDITION)


class LexicalEngine(Protocol):
    """A BM25 engine. Chunks of one document are always replaced together."""

    name: str

    async def create(self, collection: str, language: str) -> tuple[bool, str]:
        """The collection created empty, analyzed in `language` (empty: its declared one) and recording it, unless
        the engine holds it: (created, the collection's language). A collection without a record (created by a
        write, or before collections recorded theirs) is analyzed in its declared language. Refusals:
        INVALID_ARGUMENT (an unsupported language), ALREADY_EXISTS (it exists with another language),
        FAILED_PRECONDITION (a language other than the declared one on an engine without them)."""
        ...

    async def upsert(self, collection: str, chunks: list[common_pb2.Chunk]) -> UpsertResult: ...

    async def reseal(self, collection: str, chunks: list[common_pb2.Chunk], expected: dict[str, str]) -> UpsertResult:
        """`keys rotate`: documents sealed again, each re-indexed only while still as read (ResealChunksRequest)."""
        ...

    async def delete(self, collection: str, doc_ids: list[str]) -> tuple[int, int]:
        """Returns (documents deleted, chunks deleted)."""
        ...

    async def search(
        self,
        collection: str,
        queries: list[str],
        limit: int,
        filters: list[common_pb2.MetadataFilter],
        metadata_fields: tuple[str, ...] = (),
        fuzzy: bool = False,
        text_depth: int = 0,
        readers: common_pb2.Readers | None = None,
    ) -> list[list[common_pb2.LegHit]]:
        """One ranked list (best first, rank 1-based) per query; hits carry the `metadata_fields` they have.
        `readers` (not None): only documents they may read are searched, inside the engine's own query
        (security/acl.py), and the typo look-ups count only those documents.
        `fuzzy`: typo tolerance (prefix and fuzzy terms, bounded and weighted below exact matches).
        `text_depth` (> 0): hits ranked below it may come without title and text (the service clears the
        texts of every engine's below it anyway: store_servicer.trim_texts); an engine saves building them."""
        ...

    async def correct(self, collection: str, query: str, readers: common_pb2.Readers | None = None) -> str:
        """The query with each unknown word replaced by its likeliest indexed neighbour (fuzzy.correct_query); with
        `readers`, a neighbour some document they may read holds."""
        ...

    async def stats(self, collection: str, readers: common_pb2.Readers | None = None) -> EngineStats:
        """Counts and details, among them `language`: the collection's own (recorded, else declared); with
        `readers`, the documents and chunks they may read are counted."""
        ...

    async def content_hashes(self, collection: str, doc_ids: list[str]) -> dict[str, str]: ...

    async def list_documents(self, collection: str) -> list[common_pb2.StoredDocument]:
        """Every stored document (storage.stores.stored_documents), sorted by id: what reconcile compares."""
        ...

    async def get_chunks(self, collection: str, doc_ids: list[str]) -> list[common_pb2.Chunk]:
        """The stored chunks of these documents, by position: what reconcile copies to the other store."""
        ...

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
