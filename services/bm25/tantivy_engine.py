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
import os
import shutil
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import grpc
import orjson
import tantivy

from hybridsearch.bm25.analyzer import Analyzer, Analyzers
from hybridsearch.bm25.engine import field_name, requested_language
from hybridsearch.bm25.folders import FolderCollections
from hybridsearch.bm25.fuzzy import EXACT_WEIGHT, WeightedTerm, correct_query, exact_terms, expand_query
from hybridsearch.bm25.group_commit import MAX_GROUP, GroupCommit
from hybridsearch.text.chunking import indexed_text
from hybridsearch.storage.stores import (
    COLLECTION_RECORD, read_record, write_record,
    EngineStats, EngineUnavailable, UpsertResult, SPAN, chunk_from_payload, chunks_by_document, content_of, picked_metadata, span_of,
    span_payload, stored_content, stored_documents, unchanged_since,
)
from hybridsearch.contract.validation import Refusal
from hybridsearch.v1 import common_pb2

log = logging.getLogger(__name__)

TANTIVY_K1, TANTIVY_B = 1.2, 0.75  # fixed in tantivy's Bm25Weight
LUCENE7_FACTOR = TANTIVY_K1 + 1  # tantivy keeps the (k1 + 1) numerator Lucene 8 dropped
WRITER_HEAP = 64_000_000  # bytes buffered before the writer flushes a segment on its own
MAX_HITS_PER_DOC = 100_000  # a document's chunks looked up by doc_id term (far above any real chunk count)


def _schema(fields: list[str]) -> tantivy.Schema:
    builder = tantivy.SchemaBuilder()
    builder.add_text_field("body", tokenizer_name="whitespace", index_option="freq")  # analyzed title+heading+text
    builder.add_text_field("title_terms", tokenizer_name="whitespace", index_option="freq")  # analyzed title
    for key in fields:  # the collection's declared text fields, analyzed
        builder.add_text_field(field_name(key), tokenizer_name="whitespace", index_option="freq")
    builder.add_text_field("doc_id", tokenizer_name="raw", index_option="basic")
    builder.add_text_field("meta", tokenizer_name="raw", index_option="basic")  # key=value, one term each
    builder.add_unsigned_field("position", indexed=True)
    builder.add_bytes_field("payload", stored=True)  # JSON: what a hit or a write check reads back
    return builder.build()


def _payload(searcher: tantivy.Searcher, addr: tantivy.DocAddress) -> dict:
    """A chunk's stored payload (orjson: a BM25 leg reads 100 of them a query, 0.45 ms less than json)."""
    return orjson.loads(searcher.doc(addr)["payload"][0])


@dataclass(frozen=True)
class Upsert:
    chunks: list[common_pb2.Chunk]
    # A reseal (ResealChunksRequest): doc id -> the content hash it was read with; a document whose stored
    # hash or chunk count is not that any more was written since, and is left alone.
    expected: dict[str, str] | None = None


@dataclass(frozen=True)
class Delete:
    doc_ids: list[str]


Write = Upsert | Delete


def meta_term(key: str, value: str) -> str:
    return f"{key}={value}"


class _Collection:
    """One tantivy index on disk, its single writer and a reader reloaded after every commit."""

    def __init__(self, path: Path, analyzer: Analyzer, title_boost: float, fields: dict[str, float],
                 language: str = "en") -> None:
        path.mkdir(parents=True, exist_ok=True)
        self.schema = _schema(sorted(fields))
        try:
            self.index = tantivy.Index(self.schema, path=str(path), reuse=True)
        except ValueError as err:
            raise ValueError(f"{path}: the index was written with other text fields than the declared "
                             f"{sorted(fields)}; re-ingest the collection into a new one ({err})") from err
        self.fields = fields
        # Fields scored besides the body, each times its boost: the title and the declared text fields.
        self.boosted = ([("title_terms", title_boost)] if title_boost > 0 else []) + \
            [(field_name(key), boost) for key, boost in sorted(fields.items())]
        self.writer = self.index.writer(WRITER_HEAP, 1)
        self.index.config_reader("Manual")
        self.analyzer, self.title_boost = analyzer, title_boost
        self.language = language  # the collection's own: recorded, else declared (stats show it)
        self.lock = threading.Lock()  # one writer; searches never take it
        self.closed = False  # closed by a drop: its writer is gone, a write that still reaches it fails

    # --- reads ---------------------------------------------------------------------------------------

    def _term(self, field: str, value) -> tantivy.Query:
        return tantivy.Query.term_query(self.schema, field, value, index_option="basic")

    def _chunk_count(self, searcher: tantivy.Searcher, doc_id: str) -> int:
        return searcher.search(self._term("doc_id", doc_id), 1, count=True).count

    def _chunks_of(self, searcher: tantivy.Searcher, doc_id: str) -> list[dict]:
        result = searcher.search(self._term("doc_id", doc_id), MAX_HITS_PER_DOC, count=False)
        return [_payload(searcher, addr) for _, addr in result.hits]

    def _scoring(self, terms: list[WeightedTerm]) -> tantivy.Query | None:
        if not terms:
            return None
        clauses = [(tantivy.Occur.Should, self._weighted("body", t)) for t in terms]
        for field, boost in self.boosted:
            scored = tantivy.Query.boolean_query([(tantivy.Occur.Should, self._weighted(field, t)) for t in terms])
            clauses.append((tantivy.Occur.Should, tantivy.Query.boost_query(scored, boost)))
        return tantivy.Query.boolean_query(clauses)

    def _weighted(self, field: str, term: WeightedTerm) -> tantivy.Query:
        query = tantivy.Query.term_query(self.schema, field, term.term, index_option="freq")
        return query if term.weight == EXACT_WEIGHT else tantivy.Query.boost_query(query, term.weight)

    def _lookups(self, searcher: tantivy.Searcher) -> tuple:
        """fuzzy.py's look-ups on the body field: the analyzer, doc_freq, with_prefix."""
        return (self.analyzer.analyze_query, lambda term: searcher.doc_freq("body", term),
                lambda prefix, n: searcher.terms_with_prefix("body", prefix, limit=n))

    def _terms(self, searcher: tantivy.Searcher, query: str, fuzzy: bool) -> list[WeightedTerm]:
        if not fuzzy or not self.analyzer.typo_tolerant:  # hashed terms: exact only (the gateway says so)
            return exact_terms(self.analyzer.analyze_query(query))
        return expand_query(query, *self._lookups(searcher))

    def correct(self, query: str) -> str:
        if not self.analyzer.typo_tolerant:
            return query
        return correct_query(query, *self._lookups(self.index.searcher()))

    def _filter(self, filters) -> list[tuple]:
        clauses = []
        for f in filters:
            which = f.WhichOneof("condition")
            if which == "equals":
                q = self._term("meta", meta_term(f.field, f.equals))
                clauses.append((tantivy.Occur.Must, tantivy.Query.const_score_query(q, 0.0)))
            elif which == "any_of":
                q = tantivy.Query.term_set_query(self.schema, "meta", [meta_term(f.field, v) for v in f.any_of.values])
                clauses.append((tantivy.Occur.Must, tantivy.Query.const_score_query(q, 0.0)))
            elif which == "not_equals":
                clauses.append((tantivy.Occur.MustNot, self._term("meta", meta_term(f.field, f.not_equals))))
        return clauses

    def search(self, queries: list[str], limit: int, filters, metadata_fields=(),
               fuzzy: bool = False) -> list[list[common_pb2.LegHit]]:
        searcher = self.index.searcher()
        restrict = self._filter(filters)
        lists = []
        for query in queries:
            scoring = self._scoring(self._terms(searcher, query, fuzzy))
            if scoring is None or limit <= 0 or searcher.num_docs == 0:
                lists.append([])
                continue
            if restrict:
                scoring = tantivy.Query.boolean_query([(tantivy.Occur.Must, scoring), *restrict])
            result = searcher.search(scoring, limit, count=False)
            hits = []
            for rank, (score, addr) in enumerate(result.hits, 1):
                p = _payload(searcher, addr)
                hits.append(common_pb2.LegHit(chunk_id=p["chunk_id"], doc_id=p["doc_id"], score=score / LUCENE7_FACTOR,
                                              rank=rank, **content_of(p, heading=False),
                                              metadata=picked_metadata(p.get("metadata", {}), metadata_fields),
                                              span=span_of(p)))
            lists.append(hits)
        return lists

    def stats(self) -> tuple[int, int, dict[str, str]]:
        """(documents, chunks, details) from one searcher."""
        searcher = self.index.searcher()
        first_chunks = searcher.search(self._term("position", 0), 1, count=True).count
        return first_chunks, searcher.num_docs, {"segments": str(searcher.num_segments)}

    def content_hashes(self, doc_ids: list[str]) -> dict[str, str]:
        searcher = self.index.searcher()
        out = {}
        for doc_id in doc_ids:
            result = searcher.search(self._term("doc_id", doc_id), 1, count=False)
            if result.hits:
                out[doc_id] = _payload(searcher, result.hits[0][1])["content_hash"]
        return out

    def all_payloads(self) -> list[dict]:
        """Every chunk's payload, from one searcher (reconcile lists a whole collection)."""
        searcher = self.index.searcher()
        hits = searcher.search(tantivy.Query.all_query(), max(1, searcher.num_docs), count=False).hits
        return [_payload(searcher, addr) for _, addr in hits]

    def chunks_of(self, doc_ids: list[str]) -> list[common_pb2.Chunk]:
        searcher = self.index.searcher()
        return [chunk_from_payload(p) for d in doc_ids for p in sorted(self._chunks_of(searcher, d), key=lambda p: p["position"])]

    # --- writes --------------------------------------------------------------------------------------

    def _document(self, c: common_pb2.Chunk, analyzer: Analyzer) -> tantivy.Document:
        doc = tantivy.Document()
        doc.add_text("body", " ".join(analyzer.analyze(indexed_text(c.title, c.heading, c.text))))
        doc.add_text("title_terms", " ".join(analyzer.analyze(c.title)))
        declared = c.indexed_metadata if c.HasField("sealed") else c.metadata  # sealed: metadata holds hashes
        for key in self.fields:
            if declared.get(key):
                doc.add_text(field_name(key), " ".join(analyzer.analyze(declared[key])))
        doc.add_text("doc_id", c.doc_id)
        for key, value in c.metadata.items():
            doc.add_text("meta", meta_term(key, value))
        doc.add_unsigned("position", c.position)
        doc.add_bytes("payload", orjson.dumps({
            "chunk_id": c.chunk_id, "doc_id": c.doc_id, "position": c.position, **stored_content(c),
            "metadata": dict(c.metadata), "content_hash": c.content_hash,
            "written_at_ms": c.written_at_ms, SPAN: span_payload(c.span),
        }))
        return doc

    def apply(self, writes: Sequence[Write]) -> list[UpsertResult | tuple[int, int] | Exception]:
        """The writes in order, one commit for all (group_commit.py); a result per write. Should one fail,
        nothing of the group is kept and each write is applied and committed alone, so only it fails."""
        with self.lock:
            if self.closed:
                return [EngineUnavailable("the collection was dropped while this write waited; retry, it is safe")
                        for _ in writes]
            try:
                return self._apply(writes)
            except Exception as err:
                if len(writes) == 1:
                    return [err]
        return [r for w in writes for r in self.apply([w])]

    def _apply(self, writes: Sequence[Write]) -> list[UpsertResult | tuple[int, int]]:
        """Under the lock: every write added, one commit; any failure rolls the whole group back."""
        searcher = self.index.searcher()
        # A document an earlier write of this group changed: (content hash, chunks) it will have, (None, 0)
        # once deleted. The searcher still sees the last commit, so later writes of the group read this.
        pending: dict[str, tuple[str | None, int]] = {}

        def stored(doc_id: str) -> tuple[str | None, int]:
            if doc_id in pending:
                return pending[doc_id]
            payloads = self._chunks_of(searcher, doc_id)
            hashes = {p["content_hash"] for p in payloads}
            return (hashes.pop() if len(hashes) == 1 else None), len(payloads)

        results: list[UpsertResult | tuple[int, int]] = []
        changed = False
        try:
            for write in writes:
                if isinstance(write, Upsert):
                    result = UpsertResult()
                    for doc_id, doc_chunks in chunks_by_document(write.chunks).items():
                        content_hash, count = stored(doc_id)
                        if write.expected is not None and not unchanged_since(write.expected, doc_id, content_hash,
                                                                              count, len(doc_chunks)):
                            result.documents_unchanged += 1
                            continue
                        if content_hash == doc_chunks[0].content_hash and count == len(doc_chunks):
                            result.documents_unchanged += 1
                            continue
                        if count:
                            self.writer.delete_documents_by_term("doc_id", doc_id)
                        analyzer = self.analyzer.for_document(" ".join(c.text for c in doc_chunks))
                        for c in doc_chunks:
                            self.writer.add_document(self._document(c, analyzer))
                        pending[doc_id] = (doc_chunks[0].content_hash, len(doc_chunks))
                        result.documents_written += 1
                        result.chunks_written += len(doc_chunks)
                    changed |= result.documents_written > 0
                    results.append(result)
                else:
                    docs = chunks = 0
                    for doc_id in write.doc_ids:
                        count = pending[doc_id][1] if doc_id in pending else self._chunk_count(searcher, doc_id)
                        if count:
                            self.writer.delete_documents_by_term("doc_id", doc_id)
                            pending[doc_id] = (None, 0)
                            docs, chunks = docs + 1, chunks + count
                    changed |= chunks > 0
                    results.append((docs, chunks))
            if changed:
                self.writer.commit()
        except BaseException:
            self.writer.rollback()
            raise
        if changed:
            self.index.reload()
        return results

    def capture(self, path: Path, folder: Path) -> None:
        """The committed index into `folder`: meta.json and .managed.json copied, the segment files it names
        hard-linked (tantivy never changes a segment file; a merge makes new ones, so a link keeps the old
        one whole however the index goes on). Under the writer's lock, so no commit of ours runs meanwhile; a
        merge may commit and collect the old segments between reading meta.json and linking its files: then
        it is read again."""
        with self.lock:
            for _ in range(20):
                shutil.rmtree(folder, ignore_errors=True)
                folder.mkdir(parents=True)
                meta = (path / "meta.json").read_bytes()
                segments = {s["segment_id"].replace("-", "") for s in orjson.loads(meta)["segments"]}
                try:
                    for file in path.iterdir():
                        if file.name.split(".", 1)[0] in segments:
                            os.link(file, folder / file.name)
                except FileNotFoundError:
                    continue
                (folder / "meta.json").write_bytes(meta)
                for kept in (".managed.json", COLLECTION_RECORD):  # the record: written once, before the index
                    if (path / kept).exists():
                        shutil.copyfile(path / kept, folder / kept)
                return
        raise EngineUnavailable(f"{path}: merges kept replacing the segments while they were taken; try again")

    def close(self) -> None:
        with self.lock:
            if not self.closed:
                self.closed = True
                self.writer.wait_merging_threads()  # the writer is unusable afterwards


class TantivyBm25Engine(FolderCollections):
    """LexicalEngine on local disk: one tantivy index per collection under data_dir/bm25-tantivy/."""

    name = "embedded-tantivy"
    MARKER = "meta.json"

    def __init__(self, root: Path, stemmer: str = "porter", stopwords: str = "en_plus", title_boost: float = 0.0,
                 language_of=None, fields_of: Callable[[str], dict[str, float]] = lambda collection: {},
                 hashed_of: Callable[[str], bool] | None = None) -> None:
        self.root = root
        # language_of: collection -> its CollectionConfig.language (English when not given); hashed_of:
        # collection -> whether its terms come hashed (sealed_terms: hashed; indexed as they come).
        self.analyzers = Analyzers(stemmer, stopwords, language_of, hashed_of)
        self.analyzer = self.analyzers.english
        self.title_boost = title_boost
        self.fields_of = fields_of  # a collection's declared text fields and their boosts
        self._collections: dict[str, _Collection] = {}
        self._open_lock = threading.Lock()
        self._groups: dict[str, GroupCommit] = {}  # per collection: concurrent writes share a commit
        self.max_group = MAX_GROUP  # writes per commit at most (1: a commit per write, as bm25-scale compares)

    def _collection(self, name: str) -> _Collection:
        return self._open(name)[0]

    def _open(self, name: str, create: str | None = None) -> tuple[_Collection, bool]:
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
            opened = self._collections[name] = _Collection(
                path, self.analyzers.for_collection(name, language), self.title_boost, self.fields_of(name),
                language or self.analyzers.declared(name))
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

    async def search(self, collection, queries, limit, filters, metadata_fields=(), fuzzy=False):
        if not self._exists(collection):
            return [[] for _ in queries]
        return await asyncio.to_thread(lambda: self._collection(collection).search(queries, limit, filters,
                                                                                   metadata_fields, fuzzy))

    async def correct(self, collection, query):
        if not self._exists(collection):
            return query
        return await asyncio.to_thread(lambda: self._collection(collection).correct(query))

    async def stats(self, collection):
        docs, chunks, details = 0, 0, {}
        language, analyzer = self.analyzers.declared(collection), self.analyzers.for_collection(collection)
        if self._exists(collection):
            def read() -> tuple[_Collection, tuple[int, int, dict[str, str]]]:
                opened = self._collection(collection)
                return opened, opened.stats()

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

    def _close(self, opened: _Collection) -> None:
        opened.close()  # waits for its writer: a commit in progress ends before the files go

    def _capture(self, name: str, folder: Path) -> None:
        self._collection(name).capture(self.root / name, folder)

    async def close(self):
        for c in self._collections.values():
            await asyncio.to_thread(c.close)
