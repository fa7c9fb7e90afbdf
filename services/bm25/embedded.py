"""Embedded BM25: SQLite on disk is the store of record, bm25s scores in memory.

Every write lands in SQLite (WAL, one transaction per request) before it is acknowledged. The
bm25s index (Lucene's BM25 variant, configurable k1/b) is derived from the stored analyzed tokens
and rebuilt lazily on the first search after a write, so a batch of writes costs one rebuild.
An optional title field adds `title_boost` x BM25(title) to the flat title+heading+text score.
With typo tolerance (`fuzzy`), a query word the vocabulary lacks matches its nearest vocabulary terms
(fuzzy.py), each weighted below 1. Declared text fields (`CollectionConfig.fields`) are not supported
here: the service refuses to start with them (service.build_engine); use the tantivy engine. Nor are
analysis languages per collection (CreateCollection): every collection is analyzed in its declared language.
"""

from __future__ import annotations

import asyncio
import bisect
import json
import logging
import sqlite3
import threading
from dataclasses import dataclass
from pathlib import Path

import bm25s
import numpy as np

from hybridsearch.bm25.analyzer import Analyzer, Analyzers
from hybridsearch.bm25.engine import declared_only, requested_language
from hybridsearch.bm25.folders import FolderCollections
from hybridsearch.bm25.fuzzy import EXACT_WEIGHT, WeightedTerm, correct_query, exact_terms, expand_query
from hybridsearch.storage.stores import (
    EngineStats, UpsertResult, chunk_from_payload, chunks_by_document, picked_metadata, refuse_acl, refuse_readers, refuse_sealed, stored_documents,
)
from hybridsearch.text.chunking import indexed_text
from hybridsearch.contract.validation import matches_filters
from hybridsearch.v1 import common_pb2

log = logging.getLogger(__name__)

SCHEMA = """
CREATE TABLE IF NOT EXISTS chunks (
  chunk_id TEXT PRIMARY KEY,
  doc_id TEXT NOT NULL,
  position INTEGER NOT NULL,
  title TEXT NOT NULL,
  heading TEXT NOT NULL,
  text TEXT NOT NULL,
  metadata TEXT NOT NULL,
  content_hash TEXT NOT NULL,
  tokens TEXT NOT NULL,
  title_tokens TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS chunks_doc ON chunks(doc_id);
"""


@dataclass
class _Index:
    """A frozen snapshot: searches read it while a rebuild prepares the next one."""

    chunk_ids: list[str]
    doc_ids: list[str]
    titles: list[str]
    texts: list[str]
    metadata: list[dict[str, str]]
    flat: bm25s.BM25 | None
    title: bm25s.BM25 | None
    sorted_terms: list[str] | None = None  # the flat vocabulary in order, built on the first fuzzy search

    def doc_freq(self, term: str) -> int:
        indptr = self.flat.scores["indptr"]
        i = self.flat.vocab_dict.get(term)
        return int(indptr[i + 1] - indptr[i]) if i is not None and i < len(indptr) - 1 else 0

    def with_prefix(self, prefix: str, limit: int) -> list[tuple[str, int]]:
        if self.sorted_terms is None:
            self.sorted_terms = sorted(t for t in self.flat.vocab_dict if t)
        terms = self.sorted_terms
        found = []
        for i in range(bisect.bisect_left(terms, prefix), len(terms)):
            if not terms[i].startswith(prefix):
                break
            found.append((terms[i], self.doc_freq(terms[i])))
        return sorted(found, key=lambda tf: (-tf[1], tf[0]))[:limit]


class _Collection:
    def __init__(self, path: Path, analyzer: Analyzer, k1: float, b: float, title_boost: float):
        path.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(path / "store.sqlite", check_same_thread=False, isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.executescript(SCHEMA)
        self.analyzer, self.k1, self.b, self.title_boost = analyzer, k1, b, title_boost
        self.lock = threading.Lock()  # one writer or rebuild at a time
        self.dirty = True
        self.index: _Index | None = None

    def _build(self, token_lists: list[list[str]]) -> bm25s.BM25 | None:
        if not any(token_lists):
            return None
        retriever = bm25s.BM25(method="lucene", k1=self.k1, b=self.b)
        retriever.index(token_lists, show_progress=False)
        return retriever

    def snapshot(self) -> _Index:
        with self.lock:
            if self.dirty or self.index is None:
                rows = self.db.execute(
                    "SELECT chunk_id, doc_id, title, heading, text, metadata, tokens, title_tokens "
                    "FROM chunks ORDER BY rowid"
                ).fetchall()
                self.index = _Index(
                    chunk_ids=[r[0] for r in rows],
                    doc_ids=[r[1] for r in rows],
                    titles=[r[2] for r in rows],
                    texts=[r[4] for r in rows],
                    metadata=[json.loads(r[5]) for r in rows],
                    flat=self._build([r[6].split() for r in rows]),
                    title=self._build([r[7].split() for r in rows]) if self.title_boost > 0 else None,
                )
                self.dirty = False
                log.info("bm25 index rebuilt: %d chunks", len(rows))
            return self.index

    def upsert(self, chunks: list[common_pb2.Chunk]) -> UpsertResult:
        by_doc = chunks_by_document(chunks)
        result = UpsertResult()
        with self.lock:
            self.db.execute("BEGIN")
            try:
                for doc_id, doc_chunks in by_doc.items():
                    stored = self.db.execute(
                        "SELECT content_hash, count(*) FROM chunks WHERE doc_id=? GROUP BY content_hash", (doc_id,)
                    ).fetchall()
                    new_hash = doc_chunks[0].content_hash
                    if len(stored) == 1 and stored[0][0] == new_hash and stored[0][1] == len(doc_chunks):
                        result.documents_unchanged += 1
                        continue
                    self.db.execute("DELETE FROM chunks WHERE doc_id=?", (doc_id,))
                    analyzer = self.analyzer.for_document(" ".join(c.text for c in doc_chunks))
                    self.db.executemany(
                        "INSERT INTO chunks VALUES (?,?,?,?,?,?,?,?,?,?)",
                        [
                            (
                                c.chunk_id, c.doc_id, c.position, c.title, c.heading, c.text,
                                json.dumps(dict(c.metadata)), c.content_hash,
                                " ".join(analyzer.analyze(indexed_text(c.title, c.heading, c.text))),
                                " ".join(analyzer.analyze(c.title)),
                            )
                            for c in doc_chunks
                        ],
                    )
                    result.documents_written += 1
                    result.chunks_written += len(doc_chunks)
                self.db.execute("COMMIT")
            except BaseException:
                self.db.execute("ROLLBACK")
                raise
            if result.documents_written:
                self.dirty = True
        return result

    def delete(self, doc_ids: list[str]) -> tuple[int, int]:
        with self.lock:
            self.db.execute("BEGIN")
            try:
                docs = chunks = 0
                for doc_id in doc_ids:
                    n = self.db.execute("DELETE FROM chunks WHERE doc_id=?", (doc_id,)).rowcount
                    docs += 1 if n else 0
                    chunks += n
                self.db.execute("COMMIT")
            except BaseException:
                self.db.execute("ROLLBACK")
                raise
            if chunks:
                self.dirty = True
        return docs, chunks

    def search(self, queries: list[str], limit: int, filters, metadata_fields=(),
               fuzzy: bool = False) -> list[list[common_pb2.LegHit]]:
        index = self.snapshot()
        if index.flat is None:
            return [[] for _ in queries]
        mask = None
        if filters:
            mask = np.fromiter((matches_filters(m, filters) for m in index.metadata), dtype=np.float32)
        lists = []
        for query in queries:
            terms = (expand_query(query, self.analyzer.analyze_query, index.doc_freq, index.with_prefix) if fuzzy
                     else exact_terms(self.analyzer.analyze_query(query)))
            scores = weighted_scores(index.flat, terms)
            if scores is None:
                lists.append([])
                continue
            if index.title is not None:
                title = weighted_scores(index.title, terms)
                if title is not None:
                    scores = scores + self.title_boost * title
            if mask is not None:
                scores = scores * mask
            k = min(limit, int(np.count_nonzero(scores)))
            if k == 0:
                lists.append([])
                continue
            top = np.argpartition(-scores, k - 1)[:k]
            top = top[np.lexsort((top, -scores[top]))]  # score desc, then insertion order
            lists.append(
                [
                    common_pb2.LegHit(
                        chunk_id=index.chunk_ids[i], doc_id=index.doc_ids[i], score=float(scores[i]),
                        rank=r + 1, title=index.titles[i], text=index.texts[i],
                        metadata=picked_metadata(index.metadata[i], metadata_fields),
                    )
                    for r, i in enumerate(top)
                ]
            )
        return lists

    def correct(self, query: str) -> str:
        index = self.snapshot()
        if index.flat is None:
            return query
        return correct_query(query, self.analyzer.analyze_query, index.doc_freq, index.with_prefix)

    def stats(self) -> tuple[int, int]:
        docs, chunks = self.db.execute("SELECT count(DISTINCT doc_id), count(*) FROM chunks").fetchone()
        return docs, chunks

    def content_hashes(self, doc_ids: list[str]) -> dict[str, str]:
        out = {}
        for doc_id in doc_ids:
            row = self.db.execute("SELECT content_hash FROM chunks WHERE doc_id=? LIMIT 1", (doc_id,)).fetchone()
            if row:
                out[doc_id] = row[0]
        return out

    def all_payloads(self) -> list[dict]:
        """Every chunk's listed fields (this store keeps no write time: reconcile reads 0)."""
        rows = self.db.execute("SELECT doc_id, position, content_hash FROM chunks").fetchall()
        return [{"doc_id": d, "position": p, "content_hash": h} for d, p, h in rows]

    def chunks_of(self, doc_ids: list[str]) -> list[common_pb2.Chunk]:
        out = []
        for doc_id in doc_ids:
            rows = self.db.execute("SELECT chunk_id, doc_id, position, title, heading, text, metadata, content_hash "
                                   "FROM chunks WHERE doc_id=? ORDER BY position", (doc_id,)).fetchall()
            out += [chunk_from_payload({"chunk_id": r[0], "doc_id": r[1], "position": r[2], "title": r[3], "heading": r[4],
                                        "text": r[5], "metadata": json.loads(r[6]), "content_hash": r[7]}) for r in rows]
        return out


def token_ids(retriever: bm25s.BM25, tokens: list[str]) -> list[int]:
    """Ids of the tokens the index has postings for (bm25s keeps an extra "" id without postings)."""
    n_terms = len(retriever.scores["indptr"]) - 1
    ids = (retriever.vocab_dict.get(t) for t in tokens if t)
    return [i for i in ids if i is not None and i < n_terms]


def weighted_scores(retriever: bm25s.BM25, terms: list[WeightedTerm]) -> np.ndarray | None:
    """Sum of weight x BM25(term) over the terms the index knows; None when it knows none."""
    exact = token_ids(retriever, [t.term for t in terms if t.weight == EXACT_WEIGHT])
    scores = retriever.get_scores(exact) if exact else None
    for t in terms:
        ids = token_ids(retriever, [t.term]) if t.weight != EXACT_WEIGHT else []
        if ids:
            part = t.weight * retriever.get_scores(ids)
            scores = part if scores is None else scores + part
    return scores


class EmbeddedBm25Engine(FolderCollections):
    """LexicalEngine on local disk: one SQLite store per collection under data_dir/bm25/."""

    name = "embedded-bm25s"
    MARKER = "store.sqlite"

    def __init__(self, root: Path, k1: float = 0.9, b: float = 0.4, stemmer: str = "porter",
                 stopwords: str = "lucene", title_boost: float = 0.0, language_of=None) -> None:
        self.root = root
        # language_of: collection -> its CollectionConfig.language (English when not given).
        self.analyzers = Analyzers(stemmer, stopwords, language_of)
        self.analyzer = self.analyzers.english
        self.k1, self.b, self.title_boost = k1, b, title_boost
        self._collections: dict[str, _Collection] = {}
        self._open_lock = threading.Lock()

    def _collection(self, name: str) -> _Collection:
        return self._open(name)[0]

    def _open(self, name: str) -> tuple[_Collection, bool]:
        """(the collection opened, made if need be; whether this call made it)."""
        with self._open_lock:
            created = not self._exists(name)
            if name not in self._collections:
                self._collections[name] = _Collection(
                    self.root / name, self.analyzers.for_collection(name), self.k1, self.b, self.title_boost
                )
            return self._collections[name], created

    @property
    def description(self) -> dict[str, str]:
        return {"k1": str(self.k1), "b": str(self.b), "analyzer": self.analyzer.name,
                "title_boost": str(self.title_boost)}

    async def create(self, collection, language):
        """The collection created empty (LexicalEngine.create), in its declared language only."""
        declared = self.analyzers.declared(collection)
        declared_only(self.name, collection, requested_language(language, declared), declared)
        _, created = await asyncio.to_thread(self._open, collection)  # its store.sqlite, made now
        return created, declared

    async def reseal(self, collection, chunks, expected):
        refuse_sealed(chunks, self.name)  # it keeps no sealed records, so it has none to reseal
        return UpsertResult(documents_unchanged=len(expected))

    async def upsert(self, collection, chunks):
        refuse_sealed(chunks, self.name)
        refuse_acl(chunks, self.name)
        return await asyncio.to_thread(self._collection(collection).upsert, chunks)

    async def delete(self, collection, doc_ids):
        if not self._exists(collection):
            return 0, 0
        return await asyncio.to_thread(self._collection(collection).delete, doc_ids)

    async def search(self, collection, queries, limit, filters, metadata_fields=(), fuzzy=False, text_depth=0,
                     readers=None):
        refuse_readers(readers, self.name)
        if not self._exists(collection):
            return [[] for _ in queries]
        return await asyncio.to_thread(self._collection(collection).search, queries, limit, filters, metadata_fields,
                                       fuzzy)

    async def correct(self, collection, query, readers=None):
        refuse_readers(readers, self.name)
        if not self._exists(collection):
            return query
        return await asyncio.to_thread(self._collection(collection).correct, query)

    async def stats(self, collection, readers=None):
        refuse_readers(readers, self.name)
        docs, chunks = (0, 0)
        if self._exists(collection):
            docs, chunks = await asyncio.to_thread(self._collection(collection).stats)
        return EngineStats(self.name, docs, chunks,
                           {**self.description, "analyzer": self.analyzers.for_collection(collection).name,
                            "language": self.analyzers.declared(collection)})

    async def content_hashes(self, collection, doc_ids):
        if not self._exists(collection):
            return {}
        return await asyncio.to_thread(self._collection(collection).content_hashes, doc_ids)

    async def list_documents(self, collection):
        if not self._exists(collection):
            return []
        return stored_documents(await asyncio.to_thread(self._collection(collection).all_payloads))

    async def get_chunks(self, collection, doc_ids):
        if not self._exists(collection):
            return []
        return await asyncio.to_thread(self._collection(collection).chunks_of, doc_ids)

    def _capture(self, name: str, folder: Path) -> None:
        """SQLite's online backup of the store (consistent, under the collection's writer lock)."""
        opened = self._collection(name)
        folder.mkdir(parents=True)
        with opened.lock:
            target = sqlite3.connect(folder / self.MARKER)
            try:
                opened.db.backup(target)
            finally:
                target.close()

    def _close(self, opened: _Collection) -> None:
        with opened.lock:  # a write or rebuild in progress ends first
            opened.db.close()

    async def close(self):
        for c in self._collections.values():
            c.db.close()
