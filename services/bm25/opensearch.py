"""OpenSearch BM25: the LexicalEngine on an OpenSearch cluster (or anything speaking its REST API).

One index per collection, `<index_prefix><collection>`, created on first write with settings that
reproduce the embedded engine (docs/opensearch.md): a BM25 similarity with the configured k1/b, a
custom analyzer (standard tokenizer, possessive 's, lowercase, the same explicit stopword list, the
stemmer), a `flat` field holding title+heading+text, a `title` field added with `title_boost`, and a
`field_<key>` text field per declared text field (`CollectionConfig.fields`, metadata key -> boost),
summed in with its boost (multi_match most_fields).

Queries, filters and responses: bm25/opensearch_search.py (typo tolerance there too).

Every collection is analyzed in its declared language (`CollectionConfig.language`): CreateCollection
creates an index in that language, and refuses another (per-collection languages: the tantivy engine).

Writes are idempotent per document, like the embedded engine: unchanged documents (same content hash,
same chunk count) are skipped; a changed document's chunks are indexed under one write id and its
chunks from earlier writes are deleted afterwards, so a search never sees the document missing.
User text only ever reaches `match`/`multi_match` (never `query_string`): it is analyzed as words.
A response with failed shards or `timed_out`, or a cluster that does not answer, raises
EngineUnavailable, which the BM25 service reports as UNAVAILABLE: the gateway marks the leg failed
and the answer degraded.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

from opensearchpy import AsyncOpenSearch, helpers
from opensearchpy.exceptions import (
    RequestError,
)

from hybridsearch.bm25.engine import declared_only, field_name, requested_language
from hybridsearch.text.chunking import indexed_text
from hybridsearch.runtime.iterables import batched
from hybridsearch.contract.validation import is_collection_name
from hybridsearch.storage.stores import (
    LISTED_FIELDS,
    refuse_sealed,
    EngineStats,
    EngineUnavailable,
    UpsertResult,
    SPAN,
    chunk_from_payload,
    chunks_by_document,
    picked_metadata,
    span_of,
    span_payload,
    stored_documents,
)
from hybridsearch.v1 import common_pb2

from hybridsearch.bm25 import opensearch_snapshots
from hybridsearch.bm25.opensearch_calls import cluster_call
from hybridsearch.bm25.opensearch_index import LATE_FIELDS, READERS_KEY, index_body, with_fields
from hybridsearch.bm25.opensearch_search import check_search_response, filter_clauses, readers_clauses, \
    stored_versions, text_query, version_of, versions_query
from hybridsearch.security.acl import acl_payload, readers_key_of

log = logging.getLogger(__name__)
T = TypeVar("T")
# terms queries and aggregations over document ids go in slices of this many ids.
IDS_PER_REQUEST = 1000


class OpenSearchBm25Engine:
    """LexicalEngine on an OpenSearch cluster via opensearch-py's AsyncOpenSearch."""

    name = "opensearch-bm25"

    def __init__(self, url: str, *, k1: float = 1.2, b: float = 0.75, stemmer: str = "porter",
                 stopwords: str = "en_plus", title_boost: float = 0.0, index_prefix: str = "hybridsearch-",
                 shards: int = 1, replicas: int = 1, timeout_s: float = 10.0, search_timeout_s: float = 5.0,
                 bulk_chunk_size: int = 500, bulk_max_bytes: int = 10 * 1024 * 1024,
                 bulk_in_flight: int = 2, write_attempts: int = 4, language_of=None, snapshot_repository: str = "",
                 fields_of: Callable[[str], dict[str, float]] = lambda collection: {}) -> None:
        # Shown in errors and stats: without credentials a URL may carry (http://user:secret@host).
        parts = urlsplit(url)
        self.url = urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))
        self.body = index_body(k1=k1, b=b, stemmer=stemmer, stopwords=stopwords, shards=shards, replicas=replicas)
        # A collection declaring another language (CollectionConfig.language) gets that language's analysis.
        self._language_of = language_of or (lambda _collection: "en")
        self._body_args = {"k1": k1, "b": b, "stemmer": stemmer, "stopwords": stopwords, "shards": shards,
                           "replicas": replicas}
        self.k1, self.b, self.stemmer, self.stopwords = k1, b, stemmer, stopwords
        self.title_boost = title_boost
        self.fields_of = fields_of  # a collection's declared text fields and their boosts
        self.index_prefix = index_prefix
        self.snapshot_repository = snapshot_repository  # registered in the cluster (bm25/opensearch_snapshots.py)
        # With several shards each scores with its own statistics unless dfs gathers global ones first.
        self.search_type = "dfs_query_then_fetch" if shards > 1 else "query_then_fetch"
        self.search_timeout = f"{int(search_timeout_s * 1000)}ms"
        self.bulk_chunk_size, self.bulk_max_bytes = bulk_chunk_size, bulk_max_bytes
        # Backpressure: at most this many bulk requests in flight, across every concurrent upsert.
        self._bulk_slots = asyncio.Semaphore(bulk_in_flight)
        self.write_attempts = write_attempts
        # Transport retries would fire at once and hide a dead cluster: writes retry with backoff
        # (tenacity) and searches not at all (the gateway's deadline and degraded leg handle those).
        self.timeout_s = timeout_s
        self.client = AsyncOpenSearch(hosts=[url], timeout=timeout_s, max_retries=0, retry_on_timeout=False)
        self._known: set[str] = set()
        self._span_mapped: set[str] = set()  # indexes whose mapping has the span field (created or added here)
        self._create_lock = asyncio.Lock()
        self._score_scale: float | None = None

    def index(self, collection: str) -> str:
        return f"{self.index_prefix}{collection}"

    @property
    def description(self) -> dict[str, str]:
        return {"k1": str(self.k1), "b": str(self.b), "analyzer": f"{self.stemmer}+{self.stopwords}-stopwords",
                "title_boost": str(self.title_boost), "url": self.url}

    async def _call(self, what: str, request: Callable[[], Awaitable[T]], *, retry: bool = False) -> T:
        """Runs one client request (bm25/opensearch_calls.py); an index missing makes the next write look again."""
        return await cluster_call(what, request, self.url, self.timeout_s, self.write_attempts if retry else 0,
                                  on_not_found=self._known.clear)

    async def score_scale(self) -> float:
        """Factor that puts the server's BM25 scores on the embedded engine's scale.

        Elasticsearch and OpenSearch before 3.0 score "BM25" with LegacyBM25Similarity, which multiplies
        every score by (k1 + 1); OpenSearch 3.0 uses Lucene's BM25Similarity, as bm25s does."""
        if self._score_scale is None:
            version = (await self._call("info", self.client.info)).get("version", {})
            major = int(str(version.get("number", "0")).split(".")[0] or 0)
            legacy = version.get("distribution") != "opensearch" or major < 3
            self._score_scale = 1.0 / (1.0 + self.k1) if legacy else 1.0
        return self._score_scale

    async def _exists(self, collection: str) -> bool:
        index = self.index(collection)
        if index in self._known:
            return True
        if await self._call("exists", lambda: self.client.indices.exists(index=index)):
            self._known.add(index)
            return True
        return False

    async def create(self, collection: str, language: str) -> tuple[bool, str]:
        """The collection's index created empty (LexicalEngine.create), in its declared language only."""
        declared = self._language_of(collection)
        declared_only(self.name, collection, requested_language(language, declared), declared)
        _, created = await self._ensure(collection)
        return created, declared

    async def _ensure_index(self, collection: str) -> str:
        return (await self._ensure(collection))[0]

    async def _ensure(self, collection: str) -> tuple[str, bool]:
        """(the collection's index, made if need be; whether this call made it)."""
        index = self.index(collection)
        created = False
        async with self._create_lock:
            if not await self._exists(collection):
                body = with_fields(index_body(**self._body_args, language=self._language_of(collection)),
                                   self.fields_of(collection))
                created = await self._call("create index", lambda: self._create(index, body), retry=True)
                self._known.add(index)
            elif index not in self._span_mapped:  # an index created before spans or readers: add their fields
                await self._call("put mapping", lambda: self.client.indices.put_mapping(
                    index=index, body={"properties": LATE_FIELDS}), retry=True)
            self._span_mapped.add(index)
        return index, created

    async def _create(self, index: str, body: dict[str, Any]) -> bool:
        """Whether the index was made here (False: another replica of this service made it first)."""
        try:
            await self.client.indices.create(index=index, body=body)
            log.info("created opensearch index %s", index)
            return True
        except RequestError as err:
            if err.error != "resource_already_exists_exception":  # another replica of this service won
                raise
            return False

    async def _refresh(self, index: str) -> None:
        await self._call("refresh", lambda: self.client.indices.refresh(index=index), retry=True)

    async def _stored_versions(self, index: str, doc_ids: list[str]) -> dict[str, dict[str, int]]:
        """For each stored document: {content hash: chunk count} over all of its chunks, each hash with the readers
        (READERS_KEY) its chunks have appended after a space (a chunk indexed before readers: the default's)."""
        out: dict[str, dict[str, int]] = {}
        for ids in batched(doc_ids, IDS_PER_REQUEST):
            body = versions_query(ids)
            out.update(stored_versions(check_search_response(
                await self._call("version look-up", lambda: self.client.search(index=index, body=body), retry=True))))
        return out

    async def reseal(self, collection: str, chunks: list[common_pb2.Chunk], expected: dict[str, str]) -> UpsertResult:
        refuse_sealed(chunks, self.name)  # it keeps no sealed records, so it has none to reseal
        return UpsertResult(documents_unchanged=len(expected))

    async def upsert(self, collection: str, chunks: list[common_pb2.Chunk]) -> UpsertResult:
        refuse_sealed(chunks, self.name)
        by_doc = chunks_by_document(chunks)
        result = UpsertResult()
        if not by_doc:
            return result
        index = await self._ensure_index(collection)
        fields = self.fields_of(collection)
        stored = await self._stored_versions(index, list(by_doc))
        write_id = uuid.uuid4().hex
        changed: list[str] = []
        actions: list[dict[str, Any]] = []
        for doc_id, doc_chunks in by_doc.items():
            if stored.get(doc_id) == {version_of(doc_chunks[0]): len(doc_chunks)}:  # the same content and readers
                result.documents_unchanged += 1
                continue
            changed.append(doc_id)
            result.documents_written += 1
            result.chunks_written += len(doc_chunks)
            for n, c in enumerate(doc_chunks):
                actions.append({
                    "_index": index, "_id": c.chunk_id,
                    "_source": {
                        "flat": indexed_text(c.title, c.heading, c.text), "title": c.title, "heading": c.heading,
                        "text": c.text, "doc_id": c.doc_id, "position": c.position,
                        "content_hash": c.content_hash, "write_id": write_id, "first_chunk": n == 0,
                        "meta": dict(c.metadata), SPAN: span_payload(c.span), **acl_payload(c.acl),
                        READERS_KEY: readers_key_of(c.acl),
                        **{field_name(key): c.metadata[key] for key in fields if c.metadata.get(key)},
                    },
                })
        if not actions:
            return result
        await asyncio.gather(*(self._bulk(part) for part in batched(actions, self.bulk_chunk_size)))
        await self._refresh(index)
        # Chunks of the changed documents from earlier writes (a document that shrank leaves some).
        for ids in batched(changed, IDS_PER_REQUEST):
            stale = {"bool": {"filter": [{"terms": {"doc_id": ids}}],
                              "must_not": [{"term": {"write_id": write_id}}]}}
            await self._delete_by_query(index, stale)
        return result

    async def _bulk(self, actions: list[dict[str, Any]]) -> None:
        async with self._bulk_slots:
            try:
                # max_retries: items (or whole requests) rejected with 429 are resent with backoff.
                await self._call("bulk", lambda: helpers.async_bulk(
                    self.client, actions, chunk_size=self.bulk_chunk_size, max_chunk_bytes=self.bulk_max_bytes,
                    max_retries=self.write_attempts, initial_backoff=0.5, max_backoff=10,
                ), retry=True)
            except helpers.BulkIndexError as err:
                first = err.errors[0] if err.errors else {}
                raise EngineUnavailable(
                    f"opensearch bulk: {len(err.errors)} chunks not indexed, e.g. {first}"
                ) from err

    async def _delete_by_query(self, index: str, query: dict[str, Any]) -> int:
        response = await self._call("delete_by_query", lambda: self.client.delete_by_query(
            index=index, body={"query": query}, params={"refresh": "true", "conflicts": "proceed"},
        ), retry=True)
        if response.get("failures"):
            raise EngineUnavailable(f"opensearch delete_by_query failures: {response['failures'][:3]}")
        return int(response.get("deleted", 0))

    async def delete(self, collection: str, doc_ids: list[str]) -> tuple[int, int]:
        if not doc_ids or not await self._exists(collection):
            return 0, 0
        index = self.index(collection)
        docs = chunks = 0
        for ids in batched(list(dict.fromkeys(doc_ids)), IDS_PER_REQUEST):
            docs += await self._count(index, {"bool": {"filter": [{"terms": {"doc_id": ids}},
                                                                  {"term": {"first_chunk": True}}]}})
            chunks += await self._delete_by_query(index, {"terms": {"doc_id": ids}})
        return docs, chunks

    async def _count(self, index: str, query: dict[str, Any] | None = None) -> int:
        body = {"query": query} if query else None
        response = check_search_response(
            await self._call("count", lambda: self.client.count(index=index, body=body), retry=True)
        )
        return int(response["count"])

    def _text_query(self, text: str, collection: str, fuzzy: bool) -> dict[str, Any]:
        return text_query(text, self.fields_of(collection), self.title_boost, fuzzy)

    async def search(self, collection, queries, limit, filters, metadata_fields=(), fuzzy=False, text_depth=0,
                     readers=None):
        if not await self._exists(collection):
            return [[] for _ in queries]
        index = self.index(collection)
        must, must_not = (a + b for a, b in zip(filter_clauses(filters), readers_clauses(readers)))
        lines: list[dict[str, Any]] = []
        for text in queries:
            lines.append({"index": index, "search_type": self.search_type})
            lines.append({
                "size": limit,
                "timeout": self.search_timeout,
                "track_total_hits": False,
                "_source": ["doc_id", "title", "text", SPAN, *(f"meta.{f}" for f in metadata_fields)],
                "query": {"bool": {"must": [self._text_query(text, collection, fuzzy)], "filter": must,
                                   "must_not": must_not}},
            })
        scale = await self.score_scale()
        response = await self._call("msearch", lambda: self.client.msearch(body=lines))
        lists = []
        for item in response["responses"]:
            if item.get("error", {}).get("type") == "index_not_found_exception":
                self._known.discard(index)  # deleted since the existence check
                lists.append([])
                continue
            hits = check_search_response(item)["hits"]["hits"]
            lists.append([
                common_pb2.LegHit(chunk_id=h["_id"], doc_id=h["_source"]["doc_id"], score=float(h["_score"]) * scale,
                                  rank=rank, title=h["_source"].get("title", ""), text=h["_source"].get("text", ""),
                                  metadata=picked_metadata(h["_source"].get("meta", {}), metadata_fields),
                                  span=span_of(h["_source"]))
                for rank, h in enumerate(hits, start=1)
            ])
        return lists

    async def correct(self, collection: str, query: str, readers=None) -> str:
        return query  # no term-level look-ups here (see the module docstring)

    async def stats(self, collection: str, readers=None) -> EngineStats:
        docs = chunks = 0
        details = {**self.description, "index": self.index(collection), "language": self._language_of(collection)}
        if await self._exists(collection):
            index = self.index(collection)
            within, without = readers_clauses(readers)
            docs = await self._count(index, {"bool": {"filter": [{"term": {"first_chunk": True}}, *within],
                                                      "must_not": without}})
            chunks = await self._count(index, {"bool": {"filter": within, "must_not": without}} if within else None)
            details["score_scale"] = f"{await self.score_scale():.6g}"
        return EngineStats(self.name, docs, chunks, details)

    async def content_hashes(self, collection: str, doc_ids: list[str]) -> dict[str, str]:
        if not doc_ids or not await self._exists(collection):
            return {}
        index = self.index(collection)
        out: dict[str, str] = {}
        for ids in batched(list(dict.fromkeys(doc_ids)), IDS_PER_REQUEST):
            body = {"size": len(ids), "_source": ["doc_id", "content_hash"],
                    "query": {"bool": {"filter": [{"terms": {"doc_id": ids}}, {"term": {"first_chunk": True}}]}}}
            response = check_search_response(
                await self._call("hash look-up", lambda: self.client.search(index=index, body=body), retry=True)
            )
            out.update({h["_source"]["doc_id"]: h["_source"]["content_hash"] for h in response["hits"]["hits"]})
        return out

    async def list_documents(self, collection: str) -> list[common_pb2.StoredDocument]:
        """Every chunk's listed fields, by a scroll over the index. The index mapping is strict and keeps no
        write time (adding one would need a mapping change on existing indexes): reconcile reads 0."""
        if not await self._exists(collection):
            return []
        body = {"_source": LISTED_FIELDS, "query": {"match_all": {}}}

        async def scan() -> list[dict]:
            return [h["_source"] async for h in helpers.async_scan(self.client, index=self.index(collection), query=body,
                                                                   size=5000)]
        return stored_documents(await self._call("list documents", scan, retry=True))

    async def get_chunks(self, collection: str, doc_ids: list[str]) -> list[common_pb2.Chunk]:
        if not doc_ids or not await self._exists(collection):
            return []
        index = self.index(collection)
        out: list[common_pb2.Chunk] = []
        for ids in batched(list(dict.fromkeys(doc_ids)), IDS_PER_REQUEST):
            body = {"size": 10_000, "query": {"terms": {"doc_id": ids}}, "sort": [{"doc_id": "asc"}, {"position": "asc"}]}
            response = check_search_response(
                await self._call("chunk look-up", lambda: self.client.search(index=index, body=body), retry=True))
            out += [chunk_from_payload({**h["_source"], "chunk_id": h["_id"]}) for h in response["hits"]["hits"]]
        return out

    async def collections(self) -> list[str]:
        """The collections whose index carries this engine's prefix."""
        found = await self._call("list indices", lambda: self.client.indices.get(index=f"{self.index_prefix}*"))
        names = (index[len(self.index_prefix):] for index in found if index.startswith(self.index_prefix))
        return sorted(name for name in names if is_collection_name(name))

    # Snapshots are the cluster's own, into its registered repository (bm25/opensearch_snapshots.py).
    capture, verify_restorable, install = opensearch_snapshots.capture, opensearch_snapshots.check, opensearch_snapshots.install

    def forget(self, collection: str) -> None:  # its index was made behind the engine's back: look again
        self._known.discard(self.index(collection))

    async def drop(self, collection: str) -> bool:
        if not await self._exists(collection):
            return False
        index = self.index(collection)
        await self._call("delete index", lambda: self.client.indices.delete(index=index), retry=True)
        self._known.discard(index)
        return True

    async def close(self) -> None:
        await self.client.close()
