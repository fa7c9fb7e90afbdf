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
import time
from collections.abc import AsyncIterator

import grpc

from hybridsearch.runtime import metrics
from hybridsearch.config.collections import collection_config
from hybridsearch.config.settings import Settings
from hybridsearch.security.hashed_terms import HashedTerms
from hybridsearch.security.sealing import Sealer
from hybridsearch.runtime.telemetry import tracer
from hybridsearch.contract.validation import check_collection, check_doc_ids, check_written_collection
from hybridsearch.contract.errors import Refusal, abort_invalid
from hybridsearch.gateway.access.admission import Admission, Overloaded
from hybridsearch.gateway.access.auth import readers
from hybridsearch.gateway.backends import Backends
from hybridsearch.gateway.resources.catalog import Catalog
from hybridsearch.gateway.ingest.both_stores import store_failure, write_both
from hybridsearch.gateway.ingest.checks import check_store_request, validate_documents
from hybridsearch.gateway.ingest.chunks import store_requests
from hybridsearch.gateway.ingest.write_order import WriteOrder
from hybridsearch.v1 import common_pb2, ingest_pb2, ingest_pb2_grpc

INGEST_MAX_WAIT_S = 30.0


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
        self.order = order or WriteOrder(settings.redis.state())
        self.sealer = Sealer(settings)
        self.terms = HashedTerms(settings.bm25)
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
        return await write_both(self.backends, bm25_request, vector_request)

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
            located = await self.catalog.located([collection])
            if located.missing:
                raise Refusal(f"collection {collection!r} does not exist", grpc.StatusCode.NOT_FOUND)
        except Refusal as err:
            await abort_invalid(context, err)
        stored = located.stored[collection]  # an alias: its serving generation
        # counts of what the caller may read: a document it may not read is not counted
        req = common_pb2.StoreStatsRequest(collection=stored, readers=readers(
            collection_config(self.settings, collection), self.settings.auth.keys_file is not None))
        out = ingest_pb2.StatsResponse(collection=collection)
        for store, stub in (("bm25", self.backends.bm25), ("vector", self.backends.vector)):
            try:
                s = await stub.Stats(req, timeout=30)
            except grpc.aio.AioRpcError as err:
                out.stores.append(ingest_pb2.StoreSummary(store=store, engine="unavailable", details={"error": err.details() or ""}))
                continue
            out.stores.append(ingest_pb2.StoreSummary(store=store, engine=s.engine, documents=s.documents, chunks=s.chunks, details=s.details))
        return out
