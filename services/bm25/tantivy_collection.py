"""One tantivy index, one collection: its schema, searches over its segments, and its writes (a batch of
upserts and deletes in one commit, shared by the writes that arrive while a commit runs). The engine over them
all, and the design (scoring, writes, languages), is bm25/tantivy_engine.py."""

from __future__ import annotations

import logging
import os
import shutil
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import orjson
import tantivy

from hybridsearch.bm25.analyzer import Analyzer
from hybridsearch.bm25.engine import field_name
from hybridsearch.bm25.fuzzy import EXACT_WEIGHT, WeightedTerm, correct_query, exact_terms, expand_query
from hybridsearch.text.chunking import indexed_text
from hybridsearch.storage.stores import (
    COLLECTION_RECORD, BuiltHits, EngineUnavailable, UpsertResult, SPAN, chunk_from_payload, chunks_by_document, leg_hit,
    span_payload, stored_content, unchanged_since,
)
from hybridsearch.bm25.tantivy_queries import count_within, filter_clauses, kept_count, lookups, meta_term, \
    reader_clauses, reader_terms, readers_idf, term, term_freq, unmarked_chunks
from hybridsearch.security.acl import acl_payload, readers_key, same_readers
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


class TantivyCollection:
    """One tantivy index on disk, its single writer and a reader reloaded after every commit."""

    def __init__(self, path: Path, analyzer: Analyzer, title_boost: float, fields: dict[str, float],
                 language: str = "en", payload_cache: int = 0) -> None:
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
        # Parsed payloads of the reader's documents by (segment, document): a searcher's addresses name immutable
        # segment files, so an entry holds until the reader reloads (a write), which starts a new cache. Taken
        # before the searcher (`_reader`): a search that meets a reload fills the cache it took, now let go.
        self.payload_cache = payload_cache
        self._payloads: dict[tuple[int, int], dict] = {}
        self._readable_counts: dict[tuple, int] = {}  # readers_idf's counts for this reader of the index
        self._unmarked: bool | None = None  # whether it holds chunks written before readers (None: not looked yet)
        self.built = BuiltHits(2 * payload_cache, lambda p, fields, content: leg_hit(p, 0.0, 0, fields, content)) \
            if payload_cache else None

    # --- reads ---------------------------------------------------------------------------------------

    def _chunk_count(self, searcher: tantivy.Searcher, doc_id: str) -> int:
        return count_within(searcher, term(self.schema, "doc_id", doc_id))

    def _chunks_of(self, searcher: tantivy.Searcher, doc_id: str) -> list[dict]:
        result = searcher.search(term(self.schema, "doc_id", doc_id), MAX_HITS_PER_DOC, count=False)
        return [_payload(searcher, addr) for _, addr in result.hits]

    def _scoring(self, terms: list[WeightedTerm], idf: Callable[[str, str], float] | None = None) -> tantivy.Query | None:
        """The terms scored in the body and the boosted fields; `idf` (readers_idf): each term's IDF the readers'."""
        if not terms:
            return None
        clauses = [(tantivy.Occur.Should, self._weighted("body", t, idf)) for t in terms]
        for field, boost in self.boosted:
            scored = tantivy.Query.boolean_query([(tantivy.Occur.Should, self._weighted(field, t, idf)) for t in terms])
            clauses.append((tantivy.Occur.Should, tantivy.Query.boost_query(scored, boost)))
        return tantivy.Query.boolean_query(clauses)

    def _weighted(self, field: str, term: WeightedTerm, idf: Callable[[str, str], float] | None) -> tantivy.Query:
        query = term_freq(self.schema, field, term.term)
        weight = term.weight * (idf(field, term.term) if idf is not None else 1.0)
        return query if weight == EXACT_WEIGHT else tantivy.Query.boost_query(query, weight)

    def _terms(self, searcher: tantivy.Searcher, query: str, fuzzy: bool, restrict: list = (),
               kept: Callable | None = None) -> list[WeightedTerm]:
        if not fuzzy or not self.analyzer.typo_tolerant:  # hashed terms: exact only (the gateway says so)
            return exact_terms(self.analyzer.analyze_query(query))
        return expand_query(query, *lookups(self.schema, searcher, self.analyzer, restrict, kept))

    def correct(self, query: str, readers: common_pb2.Readers | None = None) -> str:
        if not self.analyzer.typo_tolerant:
            return query
        searcher = self.index.searcher()
        return correct_query(query, *lookups(self.schema, searcher, self.analyzer,
                                             self._reader_clauses(searcher, readers)))

    def search(self, queries: list[str], limit: int, filters, metadata_fields=(),
               fuzzy: bool = False, text_depth: int = 0,
               readers: common_pb2.Readers | None = None) -> list[list[common_pb2.LegHit]]:
        """One list per query; hits ranked below `text_depth` (> 0) without their title and text (the gateway reads
        the few it shows from the store), as store_servicer.trim_texts would leave them, not built to be cleared."""
        known = self._readable_counts  # before the searcher, as the payload cache (_reader)
        payloads, searcher = self._reader()
        readers_only = self._reader_clauses(searcher, readers)
        filtered = filter_clauses(self.schema, filters)
        restrict = filtered + readers_only
        kept = kept_count(searcher, readers_only, known, readers_key(readers)) if readers_only else None
        idf = readers_idf(self.schema, searcher, kept) if kept is not None and searcher.num_docs else None
        # without filters the corrections count under the reader's clauses alone: the IDF's kept counts serve both
        corrections = kept if not filtered else None
        lists = []
        for query in queries:
            scoring = self._scoring(self._terms(searcher, query, fuzzy, restrict, corrections), idf)
            if scoring is None or limit <= 0 or searcher.num_docs == 0:
                lists.append([])
                continue
            if restrict:
                scoring = tantivy.Query.boolean_query([(tantivy.Occur.Must, scoring), *restrict])
            result = searcher.search(scoring, limit, count=False)
            depth = text_depth or limit
            if self.built is not None:  # payloads cached: each hit copied from the one built for its payload before
                ranked, fields = common_pb2.RankedList(), tuple(metadata_fields)
                for rank, (score, addr) in enumerate(result.hits, 1):
                    self.built.add(ranked, payloads(addr), score / LUCENE7_FACTOR, rank, fields, rank <= depth)
                lists.append(list(ranked.hits))
                continue
            # below the text depth no title or text; its span still (LegHit.span is kept below text_depth)
            lists.append([leg_hit(payloads(addr), score / LUCENE7_FACTOR, rank, metadata_fields, rank <= depth)
                          for rank, (score, addr) in enumerate(result.hits, 1)])
        return lists

    def _reader(self) -> tuple[Callable[[tantivy.DocAddress], dict], tantivy.Searcher]:
        """A searcher and its payload reader: through this reader's cache (Bm25Settings.payload_cache), or the
        stored document parsed each time."""
        cache = self._payloads  # before the searcher: a reload after this line leaves the entries in a cache let go
        searcher = self.index.searcher()
        if not self.payload_cache:
            return partial(_payload, searcher), searcher

        def payload(addr: tantivy.DocAddress) -> dict:
            key = (addr.segment_ord, addr.doc)
            if (found := cache.get(key)) is None:
                if len(cache) >= self.payload_cache:
                    cache.clear()  # bounded: a reader that has read more starts again
                found = cache[key] = _payload(searcher, addr)
            return found
        return payload, searcher

    def _reader_clauses(self, searcher: tantivy.Searcher, readers: common_pb2.Readers | None) -> list:
        """reader_clauses for this searcher: the scan for chunks written before readers only where some are."""
        if readers is None:
            return []
        if (unmarked := self._unmarked) is None:
            unmarked = self._unmarked = unmarked_chunks(self.schema, searcher)
        return reader_clauses(self.schema, readers, unmarked)

    def _reloaded(self) -> None:
        """The reader after a commit, and a new payload cache for it (the old segment ordinals name others now)."""
        self.index.reload()
        self._payloads, self._readable_counts, self._unmarked = {}, {}, None

    def stats(self, readers: common_pb2.Readers | None = None) -> tuple[int, int, dict[str, str]]:
        """(documents, chunks, details) from one searcher; with `readers`, the documents and chunks they may read."""
        searcher = self.index.searcher()
        restrict = self._reader_clauses(searcher, readers)
        chunks = count_within(searcher, tantivy.Query.all_query(), restrict) if restrict else searcher.num_docs
        return (count_within(searcher, term(self.schema, "position", 0), restrict), chunks,
                {"segments": str(searcher.num_segments)})

    def content_hashes(self, doc_ids: list[str]) -> dict[str, str]:
        searcher = self.index.searcher()
        out = {}
        for doc_id in doc_ids:
            result = searcher.search(term(self.schema, "doc_id", doc_id), 1, count=False)
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
        for reader in reader_terms(c.acl):
            doc.add_text("meta", reader)
        doc.add_unsigned("position", c.position)
        doc.add_bytes("payload", orjson.dumps({
            "chunk_id": c.chunk_id, "doc_id": c.doc_id, "position": c.position, **stored_content(c),
            "metadata": dict(c.metadata), "content_hash": c.content_hash,
            "written_at_ms": c.written_at_ms, SPAN: span_payload(c.span), **acl_payload(c.acl),
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
        # A document an earlier write of this group changed: (content hash, chunks, readers) it will have,
        # (None, 0, {}) once deleted. The searcher still sees the last commit, so later writes of the group read this.
        pending: dict[str, tuple[str | None, int, dict]] = {}

        def stored(doc_id: str) -> tuple[str | None, int, dict]:
            if doc_id in pending:
                return pending[doc_id]
            payloads = self._chunks_of(searcher, doc_id)
            hashes = {p["content_hash"] for p in payloads}
            return (hashes.pop() if len(hashes) == 1 else None), len(payloads), payloads[0] if payloads else {}

        results: list[UpsertResult | tuple[int, int]] = []
        changed = False
        try:
            for write in writes:
                if isinstance(write, Upsert):
                    result = UpsertResult()
                    for doc_id, doc_chunks in chunks_by_document(write.chunks).items():
                        content_hash, count, first = stored(doc_id)
                        if write.expected is not None and not unchanged_since(write.expected, doc_id, content_hash,
                                                                              count, len(doc_chunks)):
                            result.documents_unchanged += 1
                            continue
                        if content_hash == doc_chunks[0].content_hash and count == len(doc_chunks) and \
                                same_readers(first, doc_chunks[0].acl):  # new readers: indexed again, no new text
                            result.documents_unchanged += 1
                            continue
                        if count:
                            self.writer.delete_documents_by_term("doc_id", doc_id)
                        analyzer = self.analyzer.for_document(" ".join(c.text for c in doc_chunks))
                        for c in doc_chunks:
                            self.writer.add_document(self._document(c, analyzer))
                        pending[doc_id] = (doc_chunks[0].content_hash, len(doc_chunks), acl_payload(doc_chunks[0].acl))
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
                            pending[doc_id] = (None, 0, {})
                            docs, chunks = docs + 1, chunks + count
                    changed |= chunks > 0
                    results.append((docs, chunks))
            if changed:
                self.writer.commit()
        except BaseException:
            self.writer.rollback()
            raise
        if changed:
            self._reloaded()
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
