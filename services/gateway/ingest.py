"""IngestService: chunk documents and write them to both stores before acknowledging.

Writes are idempotent: every chunk carries its document's content hash, and each store skips a
document whose stored hash and chunk count already match. A write is acknowledged only when both
stores confirmed it; if either fails the call fails (UNAVAILABLE) and can simply be retried.
"""

from __future__ import annotations

import asyncio

import grpc

from hybridsearch.common import metrics
from hybridsearch.common.chunking import chunk_text, content_hash
from hybridsearch.common.config import Settings
from hybridsearch.common.telemetry import tracer
from hybridsearch.common.validation import FIELD_NAME, InvalidArgument, abort_invalid, check_collection, check_doc_id
from hybridsearch.gateway.admission import Admission, Overloaded
from hybridsearch.gateway.backends import Backends
from hybridsearch.v1 import common_pb2, ingest_pb2, ingest_pb2_grpc

MAX_DOCUMENTS = 1000
MAX_TEXT_CHARS = 2_000_000
MAX_TITLE_CHARS = 1000
MAX_METADATA = 64
WRITE_TIMEOUT_S = 600.0
INGEST_MAX_WAIT_S = 30.0


def document_chunks(doc: ingest_pb2.Document, words: int, overlap: int, tag: str = "") -> list[common_pb2.Chunk]:
    """The document's chunks of `words` words; `tag` keeps a store's own chunk ids apart from the shared ones."""
    metadata = dict(doc.metadata)
    digest = content_hash(doc.title, doc.text, metadata)
    return [
        common_pb2.Chunk(
            chunk_id=f"{doc.id}#{tag}{piece.position}", doc_id=doc.id, position=piece.position, title=doc.title,
            heading=piece.heading, text=piece.text, metadata=metadata, content_hash=digest,
        )
        for piece in chunk_text(doc.text, words, overlap)
    ]


def store_requests(collection: str, documents: list[ingest_pb2.Document],
                   settings: Settings) -> tuple[common_pb2.UpsertChunksRequest, common_pb2.UpsertChunksRequest]:
    """What each store is sent: the shared chunks, or the vector leg's own passages when configured."""
    shared = [c for d in documents for c in document_chunks(d, settings.chunk_words, settings.chunk_overlap_words)]
    bm25 = common_pb2.UpsertChunksRequest(collection=collection, chunks=shared)
    words = settings.vector.chunk_words
    if not words or words == settings.chunk_words:
        return bm25, bm25
    passages = [c for d in documents for c in document_chunks(d, words, settings.vector.chunk_overlap_words, "p")]
    return bm25, common_pb2.UpsertChunksRequest(collection=collection, chunks=passages)


def validate_documents(documents) -> list[ingest_pb2.Document]:
    if len(documents) > MAX_DOCUMENTS:
        raise InvalidArgument(f"at most {MAX_DOCUMENTS} documents a request, got {len(documents)}")
    latest: dict[str, ingest_pb2.Document] = {}
    for i, doc in enumerate(documents):
        check_doc_id(doc.id)
        if not doc.text.strip() and not doc.title.strip():
            raise InvalidArgument(f"documents[{i}] ({doc.id!r}) has neither title nor text")
        if len(doc.text) > MAX_TEXT_CHARS:
            raise InvalidArgument(f"documents[{i}] ({doc.id!r}) text is over {MAX_TEXT_CHARS} characters")
        if len(doc.title) > MAX_TITLE_CHARS:
            raise InvalidArgument(f"documents[{i}] ({doc.id!r}) title is over {MAX_TITLE_CHARS} characters")
        if len(doc.metadata) > MAX_METADATA:
            raise InvalidArgument(f"documents[{i}] ({doc.id!r}) has more than {MAX_METADATA} metadata fields")
        for key in doc.metadata:
            if not FIELD_NAME.match(key):
                raise InvalidArgument(f"documents[{i}] ({doc.id!r}) metadata key {key[:80]!r} is invalid")
        latest[doc.id] = doc  # a document repeated in one request: the last copy wins
    return list(latest.values())


class IngestServicer(ingest_pb2_grpc.IngestServiceServicer):
    def __init__(self, settings: Settings, backends: Backends) -> None:
        self.settings = settings
        self.backends = backends
        self.tracer = tracer(__name__)
        # Writes wait longer for a slot than searches (a bulk load is patient), but never without bound.
        cfg = settings.admission
        self.admission = Admission(cfg.max_ingest_in_flight, 4 * cfg.max_ingest_in_flight, INGEST_MAX_WAIT_S)

    async def _write(self, collection: str, documents: list[ingest_pb2.Document], context) -> ingest_pb2.UpsertResponse:
        try:
            async with self.admission.slot(context.time_remaining() or INGEST_MAX_WAIT_S):
                return await self._write_admitted(collection, documents, context)
        except Overloaded as err:
            metrics.REJECTED.labels(reason=err.reason).inc()
            await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED,
                                f"ingest at capacity ({err}): nothing of this batch was written, retry with backoff")

    async def _write_admitted(self, collection: str, documents: list[ingest_pb2.Document], context
                              ) -> ingest_pb2.UpsertResponse:
        bm25_request, vector_request = await asyncio.to_thread(store_requests, collection, documents, self.settings)
        with self.tracer.start_as_current_span("gateway.ingest") as span:
            span.set_attribute("ingest.documents", len(documents))
            results = await asyncio.gather(
                self.backends.bm25.UpsertChunks(bm25_request, timeout=WRITE_TIMEOUT_S),
                self.backends.vector.UpsertChunks(vector_request, timeout=WRITE_TIMEOUT_S),
                return_exceptions=True,
            )
        failures = [f"{store}: {r.details() if isinstance(r, grpc.aio.AioRpcError) else r}"
                    for store, r in zip(("bm25", "vector"), results) if isinstance(r, BaseException)]
        if failures:
            codes = {r.code() for r in results if isinstance(r, grpc.aio.AioRpcError)}
            code = grpc.StatusCode.INVALID_ARGUMENT if codes == {grpc.StatusCode.INVALID_ARGUMENT} else grpc.StatusCode.UNAVAILABLE
            await context.abort(code, "write not acknowledged, retry is safe: " + "; ".join(failures))
        bm25, vector = results
        written = max(bm25.documents_written, vector.documents_written)
        return ingest_pb2.UpsertResponse(
            documents_received=len(documents), documents_written=written,
            documents_unchanged=len(documents) - written, chunks_written=max(bm25.chunks_written, vector.chunks_written),
        )

    async def Upsert(self, request, context):
        try:
            collection = check_collection(request.collection)
            documents = validate_documents(request.documents)
        except InvalidArgument as err:
            await abort_invalid(context, err)
        return await self._write(collection, documents, context)

    async def UpsertStream(self, request_iterator, context):
        total = ingest_pb2.UpsertResponse()
        async for request in request_iterator:
            try:
                collection = check_collection(request.collection)
                documents = validate_documents(request.documents)
            except InvalidArgument as err:
                await abort_invalid(context, err)
            part = await self._write(collection, documents, context)
            total.documents_received += part.documents_received
            total.documents_written += part.documents_written
            total.documents_unchanged += part.documents_unchanged
            total.chunks_written += part.chunks_written
        return total

    async def Delete(self, request, context):
        try:
            collection = check_collection(request.collection)
            ids = [check_doc_id(i) for i in request.ids]
        except InvalidArgument as err:
            await abort_invalid(context, err)
        req = common_pb2.DeleteDocumentsRequest(collection=collection, doc_ids=ids)
        results = await asyncio.gather(
            self.backends.bm25.DeleteDocuments(req, timeout=60), self.backends.vector.DeleteDocuments(req, timeout=60),
            return_exceptions=True,
        )
        failures = [f"{s}: {r}" for s, r in zip(("bm25", "vector"), results) if isinstance(r, BaseException)]
        if failures:
            await context.abort(grpc.StatusCode.UNAVAILABLE, "delete not acknowledged, retry is safe: " + "; ".join(failures))
        return ingest_pb2.DeleteResponse(documents_deleted=max(r.documents_deleted for r in results))

    async def Stats(self, request, context):
        try:
            collection = check_collection(request.collection)
        except InvalidArgument as err:
            await abort_invalid(context, err)
        req = common_pb2.StoreStatsRequest(collection=collection)
        out = ingest_pb2.StatsResponse(collection=collection)
        for store, stub in (("bm25", self.backends.bm25), ("vector", self.backends.vector)):
            try:
                s = await stub.Stats(req, timeout=30)
            except grpc.aio.AioRpcError as err:
                out.stores.append(ingest_pb2.StoreSummary(store=store, engine="unavailable", details={"error": err.details() or ""}))
                continue
            out.stores.append(ingest_pb2.StoreSummary(store=store, engine=s.engine, documents=s.documents, chunks=s.chunks, details=s.details))
        return out
