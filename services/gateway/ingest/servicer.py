"""IngestService: chunk documents and write them to both stores before acknowledging.

Writes are idempotent: every chunk carries its document's content hash, and each store skips a
document whose stored hash and chunk count already match. A write is acknowledged only when both
stores confirmed it; if either fails the call fails (UNAVAILABLE) and can simply be retried. A
batch no store can take (a store refused it, or its chunks exceed the stores' message limit) is
INVALID_ARGUMENT: retrying it cannot succeed. A client stream that fails half-way says what it had
committed: in the message and in trailing metadata (`STREAM_PROGRESS_KEYS`).
"""

from __future__ import annotations

import asyncio
import bisect
import re
import time
from collections.abc import AsyncIterator

import grpc
import redis.asyncio as redis

from hybridsearch.runtime import metrics
from hybridsearch.runtime.services import STORES
from hybridsearch.text.chunking import chunk_lines, chunk_text, content_hash
from hybridsearch.config.settings import Settings
from hybridsearch.security.hashed_terms import HashedTerms, hashes_terms
from hybridsearch.security.sealing import CollectionSeal, Sealer
from hybridsearch.runtime.telemetry import tracer
from hybridsearch.contract.limits import MAX_DOCUMENTS, STORE_UPSERT_BYTES, human_bytes
from hybridsearch.contract.validation import (
    InvalidArgument,
    Refusal,
    abort_invalid,
    check_collection,
    check_doc_ids,
    check_document,
    check_written_collection,
)
from hybridsearch.gateway.access.admission import Admission, Overloaded
from hybridsearch.gateway.backends import Backends
from hybridsearch.gateway.resources.catalog import Catalog
from hybridsearch.gateway.ingest.write_order import WriteOrder
from hybridsearch.v1 import common_pb2, ingest_pb2, ingest_pb2_grpc

WRITE_TIMEOUT_S = 600.0
NEWLINE = re.compile("\n")
INGEST_MAX_WAIT_S = 30.0


def document_chunks(doc: ingest_pb2.Document, words: int, overlap: int, tag: str = "",
                    written_at_ms: int = 0) -> list[common_pb2.Chunk]:
    """The document's chunks of `words` words (its sections' when a reader gave some); `tag` keeps a store's
    own chunk ids apart from the shared ones; `written_at_ms` stamps the write (reconcile keeps the newer of two
    diverged versions). Each chunk knows its span in the source file."""
    metadata = dict(doc.metadata)
    digest = content_hash(doc.title, doc.text, metadata, *layout(doc))
    lines = SourceLines(doc.text, doc.source_line_offset, doc.source_char_offset)
    return [
        common_pb2.Chunk(
            chunk_id=f"{doc.id}#{tag}{position}", doc_id=doc.id, position=position, title=doc.title,
            heading=heading, text=text, metadata={**metadata, **extra}, content_hash=digest,
            written_at_ms=written_at_ms, span=lines.span(start, end),
        )
        for position, (heading, text, start, end, extra) in enumerate(_pieces(doc, words, overlap))
    ]


def layout(doc: ingest_pb2.Document) -> list[str]:
    """What a reader said of the text's layout (sections, source offsets), for the content hash: nothing for a
    document without, so that the hashes of documents written before readers gave layouts stay the same."""
    offsets = [f"+{doc.source_line_offset}:{doc.source_char_offset}"] if doc.source_line_offset or doc.source_char_offset else []
    return [s.SerializeToString(deterministic=True).hex() for s in doc.sections] + offsets


def _pieces(doc: ingest_pb2.Document, words: int, overlap: int):
    """(heading, text, start, end, section metadata) of each chunk, in order."""
    if not doc.sections:
        for piece in chunk_text(doc.text, words, overlap):
            yield piece.heading, piece.text, piece.start, piece.end, {}
        return
    for section in doc.sections:
        for span in chunk_lines(doc.text, section.start, section.end, words):
            yield section.heading, span.text, span.start, span.end, dict(section.metadata)


class SourceLines:
    """Lines and characters of a document's text counted from the top of its source file."""

    def __init__(self, text: str, line_offset: int = 0, char_offset: int = 0) -> None:
        self.breaks = [m.start() for m in NEWLINE.finditer(text)]  # scanned in C: a text is 100k characters
        self.line_offset, self.char_offset = line_offset, char_offset

    def line(self, index: int) -> int:
        """The 1-based source line of the text's character at `index`."""
        return bisect.bisect_left(self.breaks, index) + 1 + self.line_offset

    def span(self, start: int, end: int) -> common_pb2.SourceSpan:
        return common_pb2.SourceSpan(start_char=start + self.char_offset, end_char=end + self.char_offset,
                                     start_line=self.line(start), end_line=self.line(max(start, end - 1)))


def store_requests(collection: str, documents: list[ingest_pb2.Document], settings: Settings,
                   seal: CollectionSeal | None = None,
                   terms: HashedTerms | None = None) -> tuple[common_pb2.UpsertChunksRequest, common_pb2.UpsertChunksRequest]:
    """What each store is sent: the shared chunks, or the vector leg's own passages when configured; a sealed
    collection's chunks sealed (`seal`: security/sealing.py), and a hashed-terms collection's BM25 chunks with
    their words as keyed hashes (`terms`: security/hashed_terms.py; the vector store embeds the clear texts)."""
    now_ms = time.time_ns() // 1_000_000
    sealed = seal.seal_chunk if seal is not None else (lambda chunk: chunk)
    shared = [sealed(c) for d in documents
              for c in document_chunks(d, settings.chunk_words, settings.chunk_overlap_words, written_at_ms=now_ms)]
    request = common_pb2.UpsertChunksRequest(collection=collection, chunks=shared)
    bm25 = request
    if hashes_terms(seal):
        bm25 = common_pb2.UpsertChunksRequest(collection=collection,
                                              chunks=(terms or HashedTerms(settings)).chunks(seal, shared))
    words = settings.vector.chunk_words
    if not words or words == settings.chunk_words:
        return bm25, request
    passages = [sealed(c) for d in documents
                for c in document_chunks(d, words, settings.vector.chunk_overlap_words, "p", written_at_ms=now_ms)]
    return bm25, common_pb2.UpsertChunksRequest(collection=collection, chunks=passages)


def check_store_request(request: common_pb2.UpsertChunksRequest) -> None:
    """A batch whose chunks (title and metadata copied into each) exceed what a store takes is refused."""
    size = request.ByteSize()
    if size > STORE_UPSERT_BYTES:
        raise InvalidArgument(f"the batch becomes {size} bytes of chunks for the stores; the limit is "
                              f"{human_bytes(STORE_UPSERT_BYTES)}: send fewer or smaller documents")


def validate_documents(documents) -> list[ingest_pb2.Document]:
    if len(documents) > MAX_DOCUMENTS:
        raise InvalidArgument(f"at most {MAX_DOCUMENTS} documents a request, got {len(documents)}")
    latest: dict[str, ingest_pb2.Document] = {}
    for i, doc in enumerate(documents):
        check_document(doc, f"documents[{i}] ({doc.id!r})")
        latest[doc.id] = doc  # a document repeated in one request: the last copy wins
    return list(latest.values())


def store_failure(results: list, what: str = "write") -> Refusal | None:
    """The stores' answers to one write (or delete) as one refusal, or None when both acknowledged it.

    A store that refused the batch (INVALID_ARGUMENT, RESOURCE_EXHAUSTED) makes it INVALID_ARGUMENT:
    the same batch would be refused again. Anything else is UNAVAILABLE, and a retry is safe."""
    failures = [(store, r) for store, r in zip(STORES, results) if isinstance(r, BaseException)]
    if not failures:
        return None
    reasons = "; ".join(f"{store}: {r.details() if isinstance(r, grpc.aio.AioRpcError) else r}" for store, r in failures)
    refused = {grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.RESOURCE_EXHAUSTED}
    if any(isinstance(r, grpc.aio.AioRpcError) and r.code() in refused for _, r in failures):
        return InvalidArgument(f"{what} refused by a store, do not retry it unchanged: {reasons}")
    return Refusal(f"{what} not acknowledged, retry is safe: {reasons}", grpc.StatusCode.UNAVAILABLE)


# Trailing metadata of a client stream that failed: what it had committed before the failure. The
# id is binary metadata (its UTF-8 bytes): an id may hold characters an ASCII header value cannot.
STREAM_PROGRESS_KEYS = ("committed-batches", "committed-documents", "last-committed-id-bin")


def stream_progress(batches: int, documents: int, last_id: str) -> tuple[str, tuple[tuple[str, str | bytes], ...]]:
    """(sentence for the error message, trailing metadata) of a stream's committed batches."""
    sentence = (f"{batches} earlier {'batch was' if batches == 1 else 'batches were'} committed "
                f"({documents} documents, the last {last_id!r})" if batches else "nothing of this stream was committed")
    return sentence, tuple(zip(STREAM_PROGRESS_KEYS, (str(batches), str(documents), last_id.encode())))


class IngestServicer(ingest_pb2_grpc.IngestServiceServicer):
    def __init__(self, settings: Settings, backends: Backends, catalog: Catalog | None = None,
                 order: WriteOrder | None = None) -> None:
        self.settings = settings
        self.backends = backends
        self.catalog = catalog or Catalog(settings, backends)  # Stats: a collection no store holds is NOT_FOUND
        # Writes ordered against drops of their collection (gateway/ingest/write_order.py); the gateway shares one.
        self.order = order or WriteOrder(redis.Redis.from_url(settings.redis.state_url, socket_connect_timeout=0.5,
                                                              socket_timeout=5))
        self.sealer = Sealer(settings)
        self.terms = HashedTerms(settings)
        self.tracer = tracer(__name__)
        # Writes wait longer for a slot than searches (a bulk load is patient: no standing-queue test), but
        # never without bound, and never when the expected wait and write do not fit the RPC's deadline.
        cfg = settings.admission
        self.admission = Admission(cfg.max_ingest_in_flight, 4 * cfg.max_ingest_in_flight, INGEST_MAX_WAIT_S,
                                   queue_interval_s=None)

    async def _write(self, collection: str, documents: list[ingest_pb2.Document],
                     context: grpc.aio.ServicerContext) -> ingest_pb2.UpsertResponse:
        """Writes one batch to both stores of each generation the collection's alias keeps in step (the serving
        one first); raises Refusal when it was not acknowledged."""
        try:
            remaining = context.time_remaining() or INGEST_MAX_WAIT_S
            async with self.admission.slot(remaining, "upsert"):
                return await self.order.write(collection, lambda stored: self._write_admitted(collection, stored, documents),
                                              deadline=time.monotonic() + remaining)
        except Overloaded as err:
            metrics.REJECTED.labels(reason=err.reason).inc()
            raise Refusal(f"ingest at capacity ({err}): nothing of this batch was written, retry with backoff",
                          grpc.StatusCode.RESOURCE_EXHAUSTED) from None

    async def _write_admitted(self, collection: str, stored: list[str],
                              documents: list[ingest_pb2.Document]) -> ingest_pb2.UpsertResponse:
        seal = self.sealer.of(collection)  # SealingError: a sealed collection without its key writes nothing
        bm25_request, vector_request = await asyncio.to_thread(store_requests, collection, documents, self.settings,
                                                               seal, self.terms)
        check_store_request(bm25_request)
        check_store_request(vector_request)
        with self.tracer.start_as_current_span("gateway.ingest") as span:
            span.set_attribute("ingest.documents", len(documents))
            # one generation after the other, the serving one first (gateway/resources/reindex.py copies by that order)
            answers = [await self._write_stored(name, bm25_request, vector_request) for name in stored]
        bm25, vector = answers[0]
        written = max(bm25.documents_written, vector.documents_written)
        return ingest_pb2.UpsertResponse(
            documents_received=len(documents), documents_written=written,
            documents_unchanged=len(documents) - written, chunks_written=max(bm25.chunks_written, vector.chunks_written),
        )

    async def _write_stored(self, name: str, bm25_request: common_pb2.UpsertChunksRequest,
                            vector_request: common_pb2.UpsertChunksRequest) -> tuple:
        """The batch written to both stores under one stored name; Refusal unless both acknowledged it."""
        bm25_request.collection = vector_request.collection = name
        results = await asyncio.gather(
            self.backends.bm25.UpsertChunks(bm25_request, timeout=WRITE_TIMEOUT_S),
            self.backends.vector.UpsertChunks(vector_request, timeout=WRITE_TIMEOUT_S),
            return_exceptions=True,
        )
        failure = store_failure(results)
        if failure is not None:
            raise failure
        return tuple(results)

    async def Upsert(self, request: ingest_pb2.UpsertRequest,
                     context: grpc.aio.ServicerContext) -> ingest_pb2.UpsertResponse:
        try:
            return await self._write(check_written_collection(request.collection), validate_documents(request.documents),
                                     context)
        except Refusal as err:
            await abort_invalid(context, err)

    async def UpsertStream(self, request_iterator: AsyncIterator[ingest_pb2.UpsertRequest],
                           context: grpc.aio.ServicerContext) -> ingest_pb2.UpsertResponse:
        """Writes each message as it comes; a failure says how many batches were committed before it."""
        total = ingest_pb2.UpsertResponse()
        batches, last_id = 0, ""
        try:
            async for request in request_iterator:  # an undecodable message raises a Refusal here too
                documents = validate_documents(request.documents)
                part = await self._write(check_written_collection(request.collection), documents, context)
                batches, last_id = batches + 1, documents[-1].id if documents else last_id
                total.documents_received += part.documents_received
                total.documents_written += part.documents_written
                total.documents_unchanged += part.documents_unchanged
                total.chunks_written += part.chunks_written
        except Refusal as err:
            sentence, trailing = stream_progress(batches, total.documents_received, last_id)
            context.set_trailing_metadata(trailing)
            await abort_invalid(context, type(err)(f"{err} ({sentence})", err.code))
        return total

    async def Delete(self, request: ingest_pb2.DeleteRequest,
                     context: grpc.aio.ServicerContext) -> ingest_pb2.DeleteResponse:
        """Deletes from both stores of each generation the alias keeps in step, ordered with drops as writes are."""
        try:
            collection = check_written_collection(request.collection)
            ids = check_doc_ids(request.ids)
            remaining = context.time_remaining() or INGEST_MAX_WAIT_S
            return await self.order.write(collection, lambda stored: self._delete(stored, ids),
                                          deadline=time.monotonic() + remaining)
        except Refusal as err:
            await abort_invalid(context, err)

    async def _delete(self, stored: list[str], ids: list[str]) -> ingest_pb2.DeleteResponse:
        deleted = []
        for name in stored:  # the serving generation first, as writes
            req = common_pb2.DeleteDocumentsRequest(collection=name, doc_ids=ids)
            results = await asyncio.gather(self.backends.bm25.DeleteDocuments(req, timeout=60),
                                           self.backends.vector.DeleteDocuments(req, timeout=60),
                                           return_exceptions=True)
            failure = store_failure(results, "delete")
            if failure is not None:
                raise failure
            deleted.append(max(r.documents_deleted for r in results))
        return ingest_pb2.DeleteResponse(documents_deleted=deleted[0])

    async def Stats(self, request: ingest_pb2.StatsRequest,
                    context: grpc.aio.ServicerContext) -> ingest_pb2.StatsResponse:
        try:
            collection = check_collection(request.collection)
            if await self.catalog.missing([collection]):
                raise Refusal(f"collection {collection!r} does not exist", grpc.StatusCode.NOT_FOUND)
        except Refusal as err:
            await abort_invalid(context, err)
        stored = (await self.catalog.stored([collection]))[collection]  # an alias: its serving generation
        req = common_pb2.StoreStatsRequest(collection=stored)
        out = ingest_pb2.StatsResponse(collection=collection)
        for store, stub in (("bm25", self.backends.bm25), ("vector", self.backends.vector)):
            try:
                s = await stub.Stats(req, timeout=30)
            except grpc.aio.AioRpcError as err:
                out.stores.append(ingest_pb2.StoreSummary(store=store, engine="unavailable", details={"error": err.details() or ""}))
                continue
            out.stores.append(ingest_pb2.StoreSummary(store=store, engine=s.engine, documents=s.documents, chunks=s.chunks, details=s.details))
        return out
