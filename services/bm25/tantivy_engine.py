"""Embedded BM25 on tantivy: Lucene's design (immutable segments, background merges, BM25 k1 1.2 / b 0.75).

Why. The bm25s engine (`embedded.py`, `bm25.engine=bm25s`) rebuilds its whole index from SQLite on the first search
after any write: O(N) per write, unusable past ~100k chunks under writes. Tantivy writes a new segment
per commit and merges segments in the background (log merge policy), so a write costs O(batch), a
search reads every live segment with the collection's global statistics, and reopening after a restart
maps the segments back in milliseconds.

Scoring. Tantivy's BM25 is Lucene's (idf = ln(1 + (N - n + 0.5) / (n + 0.5)), k1 1.2, b 0.75 fixed,
document lengths in Lucene's one-byte field norms) times Lucene 7's (k1 + 1) factor, which is divided
out here so scores equal Lucene 8+'s and the bm25s engine's (thresholds on raw BM25 scores, such as
expansion's dominant-top-hit test, mean the same on every engine). Other k1/b values need
`bm25.engine=bm25s` (config validation says so). Text is analyzed by the same analyzer
as every other engine (the collection's language: stemmer + stopwords; analyzer.py) and indexed as whitespace-separated terms, so the three
engines agree on terms; queries are built from term queries (never a query parser: user text is never
syntax). The optional title field adds `title_boost` x BM25(title), and each text field a collection
declares (`CollectionConfig.fields`: metadata key -> boost) its boost x BM25(that field), a field of its
own in the index (a document without that key simply has no terms there). A hashed-terms collection
(`sealed_terms: hashed`) comes analyzed and hashed by the gateway: its fields are indexed as they come
(analyzer.HashedTermsAnalyzer), in order, with the same statistics. With typo tolerance
(`fuzzy`), a query word the index does not know matches its nearest indexed terms (fuzzy.py), each a
term query weighted below 1, so fuzzy matches keep BM25's idf and tf.

Writes. One `IndexWriter` per collection; a request's chunks are added and committed before it is
acknowledged (a commit is tantivy's durable point), and the reader is reloaded, so a write is
searchable as soon as it returns. Writes that arrive while a commit runs share the next one
(group_commit.py): one fsync for the group, each write acknowledged once it is durable. A document's
chunks are replaced together: delete-by-term on doc_id, then add, in one commit. Metadata is indexed
as `key=value` terms (keys cannot hold '='), which `equals`, `any_of` and `not_equals` filters match
exactly.

Languages per collection. A collection is analyzed in its declared language (`CollectionConfig.language`;
a generation `notes.g2` has its alias's) unless CreateCollection created it with another: that language
is recorded in its folder (storage/stores.py COLLECTION_RECORD), written before the index (a collection is never
without its record; a record left without an index by a crash is no collection and goes at the next
open). Tantivy leaves a file it does not manage alone, so the record stays with the index: read once when
the collection is opened, removed with the folder by a drop, copied by `capture` and moved in with the
folder by `install`. A re-index can so build a generation analyzed in another language beside the serving
one; a hashed-terms collection is indexed as its terms come whatever its language.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from pathlib import Path

import grpc

from hybridsearch.bm25.analyzer import Analyzers
from hybridsearch.bm25.engine import requested_language
from hybridsearch.bm25.folders import FolderCollections
from hybridsearch.bm25.group_commit import MAX_GROUP, GroupCommit
from hybridsearch.storage.stores import (
    COLLECTION_RECORD, read_record, write_record,
    EngineStats, UpsertResult, stored_documents,
)
from hybridsearch.contract.errors import Refusal

from hybridsearch.bm25.tantivy_collection import TANTIVY_B, TANTIVY_K1, Delete, TantivyCollection, Upsert, Write

log = logging.getLogger(__name__)



class TantivyBm25Engine(FolderCollections):
    """LexicalEngine on local disk: one tantivy index per collection under data_dir/bm25-tantivy/."""

    name = "embedded-tantivy"
    MARKER = "meta.json"

    def __init__(self, root: Path, stemmer: str = "porter", stopwords: str = "en_plus", title_boost: float = 0.0,
                 language_of=None, fields_of: Callable[[str], dict[str, float]] = lambda collection: {},
                 hashed_of: Callable[[str], bool] | None = None, payload_cache: int = 0) -> None:
        self.root = root
        self.payload_cache = payload_cache  # parsed payloads each collection keeps (Bm25Settings.payload_cache)
        # language_of: collection -> its CollectionConfig.language (English when not given); hashed_of:
        # collection -> whether its terms come hashed (sealed_terms: hashed; indexed as they come).
        self.analyzers = Analyzers(stemmer, stopwords, language_of, hashed_of)
        self.analyzer = self.analyzers.english
        self.title_boost = title_boost
        self.fields_of = fields_of  # a collection's declared text fields and their boosts
        self._collections: dict[str, TantivyCollection] = {}
        self._open_lock = threading.Lock()
        self._groups: dict[str, GroupCommit] = {}  # per collection: concurrent writes share a commit
        self.max_group = MAX_GROUP  # writes per commit at most (1: a commit per write, as bm25-scale compares)

    def _collection(self, name: str) -> TantivyCollection:
        return self._open(name)[0]

    def _open(self, name: str, create: str | None = None) -> tuple[TantivyCollection, bool]:
        """(the collection opened, whether this call created it). A collection not on disk is created: with
        `create` recorded as its language when given (CreateCollection), else without a record (a write's;
        analyzed in the declared language)."""
        with self._open_lock:
            if (opened := self._collections.get(name)) is not None:
                return opened, False
            path = self.root / name
            created = not (path / self.MARKER).exists()
            if created:
                if create is not None:
                    write_record(path, {"language": create})  # before the index: an index is never without its record
                else:  # left by a create that died before its index: no collection
                    (path / COLLECTION_RECORD).unlink(missing_ok=True)
            language = (read_record(path) or {}).get("language")
            opened = self._collections[name] = TantivyCollection(
                path, self.analyzers.for_collection(name, language), self.title_boost, self.fields_of(name),
                language or self.analyzers.declared(name), self.payload_cache)
            return opened, created

    async def create(self, collection: str, language: str) -> tuple[bool, str]:
        """The collection created empty, its language recorded (LexicalEngine.create)."""
        wanted = requested_language(language, self.analyzers.declared(collection))
        opened, created = await asyncio.to_thread(self._open, collection, wanted)
        if opened.language != wanted:
            raise Refusal(f"collection {collection!r} exists with analysis language {opened.language!r}, not "
                          f"{wanted!r}: drop it first, or create another collection", grpc.StatusCode.ALREADY_EXISTS)
        return created, opened.language

    @property
    def description(self) -> dict[str, str]:
        return {"k1": str(TANTIVY_K1), "b": str(TANTIVY_B), "analyzer": self.analyzer.name,
                "title_boost": str(self.title_boost)}

    async def _write(self, collection: str, write: Write):
        if collection not in self._groups:
            opened = await asyncio.to_thread(self._collection, collection)
            self._groups.setdefault(collection, GroupCommit(opened.apply, self.max_group))
        return await self._groups[collection].submit(write)

    def commits(self, collection: str) -> int:
        """Groups of writes this engine object has applied to the collection (one commit each at most)."""
        return self._groups[collection].commits if collection in self._groups else 0

    async def upsert(self, collection, chunks):
        return await self._write(collection, Upsert(chunks))

    async def reseal(self, collection, chunks, expected):
        """Re-indexes documents sealed again (their stored payloads replaced), each only while it is unchanged."""
        if not self._exists(collection):
            return UpsertResult(documents_unchanged=len(expected))
        return await self._write(collection, Upsert(chunks, dict(expected)))

    async def delete(self, collection, doc_ids):
        if not self._exists(collection):
            return 0, 0
        return await self._write(collection, Delete(doc_ids))

    async def search(self, collection, queries, limit, filters, metadata_fields=(), fuzzy=False, text_depth=0,
                     readers=None):
        if not self._exists(collection):
            return [[] for _ in queries]
        return await asyncio.to_thread(lambda: self._collection(collection).search(
            queries, limit, filters, metadata_fields, fuzzy, text_depth, readers))

    async def correct(self, collection, query, readers=None):
        if not self._exists(collection):
            return query
        return await asyncio.to_thread(lambda: self._collection(collection).correct(query, readers))

    async def stats(self, collection, readers=None):
        docs, chunks, details = 0, 0, {}
        language, analyzer = self.analyzers.declared(collection), self.analyzers.for_collection(collection)
        if self._exists(collection):
            def read() -> tuple[TantivyCollection, tuple[int, int, dict[str, str]]]:
                opened = self._collection(collection)
                return opened, opened.stats(readers)

            opened, (docs, chunks, details) = await asyncio.to_thread(read)
            language, analyzer = opened.language, opened.analyzer
        return EngineStats(self.name, docs, chunks, {**self.description, **details, "analyzer": analyzer.name,
                                                     "language": language})

    async def content_hashes(self, collection, doc_ids):
        if not self._exists(collection):
            return {}
        return await asyncio.to_thread(lambda: self._collection(collection).content_hashes(doc_ids))

    async def list_documents(self, collection):
        if not self._exists(collection):
            return []
        return stored_documents(await asyncio.to_thread(lambda: self._collection(collection).all_payloads()))

    async def get_chunks(self, collection, doc_ids):
        if not self._exists(collection):
            return []
        return await asyncio.to_thread(lambda: self._collection(collection).chunks_of(doc_ids))

    async def _settle(self, name: str) -> None:
        if (group := self._groups.get(name)) is not None:  # writes whose callers gave up may still be queued
            await group.idle()

    def _forget(self, name: str) -> None:
        self._groups.pop(name, None)  # writes submitted from now on open a fresh index

    def _close(self, opened: TantivyCollection) -> None:
        opened.close()  # waits for its writer: a commit in progress ends before the files go

    def _capture(self, name: str, folder: Path) -> None:
        self._collection(name).capture(self.root / name, folder)

    async def close(self):
        for c in self._collections.values():
            await asyncio.to_thread(c.close)
