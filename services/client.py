"""A small synchronous client for the gateway, used by the CLI and the benchmark."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from hybridsearch.common.access import gateway_channel
from hybridsearch.common.limits import KiB, UPSERT_REQUEST_BYTES
from hybridsearch.common.server import CHANNEL_OPTIONS, RETRY_OPTIONS
from hybridsearch.v1 import common_pb2, ingest_pb2, ingest_pb2_grpc, search_pb2, search_pb2_grpc

MODES = {"bm25": common_pb2.RETRIEVAL_MODE_BM25, "vector": common_pb2.RETRIEVAL_MODE_VECTOR,
         "hybrid": common_pb2.RETRIEVAL_MODE_HYBRID}
EFFORTS = {"fast": common_pb2.EFFORT_FAST, "balanced": common_pb2.EFFORT_BALANCED,
           "thorough": common_pb2.EFFORT_THOROUGH}


def upsert_requests(collection: str, documents: Iterable[ingest_pb2.Document], batch_size: int,
                    max_bytes: int = UPSERT_REQUEST_BYTES) -> Iterable[ingest_pb2.UpsertRequest]:
    """Batches of at most `batch_size` documents and `max_bytes` each (a document over the limit alone
    goes by itself, and the gateway says which limit it exceeds)."""
    batch: list[ingest_pb2.Document] = []
    size = len(collection) + 16 * KiB  # the collection, and room for each document's tag and length
    used = size
    for doc in documents:
        n = doc.ByteSize() + 8
        if batch and (len(batch) == batch_size or used + n > max_bytes):
            yield ingest_pb2.UpsertRequest(collection=collection, documents=batch)
            batch, used = [], size
        batch.append(doc)
        used += n
    if batch:
        yield ingest_pb2.UpsertRequest(collection=collection, documents=batch)


class GatewayClient:
    def __init__(self, address: str, api_key: str | None = None) -> None:
        # gRPC's retry policy: every public RPC is idempotent (content-hash upserts), so UNAVAILABLE is retried.
        # TLS and the API key as configured (HYBRIDSEARCH_API_KEY, else the local admin key): common/access.py
        self.channel = gateway_channel(address, [*CHANNEL_OPTIONS, *RETRY_OPTIONS], key=api_key)
        self.search_stub = search_pb2_grpc.SearchServiceStub(self.channel)
        self.ingest_stub = ingest_pb2_grpc.IngestServiceStub(self.channel)

    def search(self, request: search_pb2.SearchRequest, timeout: float = 60.0) -> search_pb2.SearchResponse:
        return self.search_stub.Search(request, timeout=timeout)

    def index(self, collection: str, documents: Iterable[ingest_pb2.Document], batch_size: int = 64,
              on_batch: Callable[[ingest_pb2.UpsertResponse], None] | None = None) -> ingest_pb2.UpsertResponse:
        total = ingest_pb2.UpsertResponse()
        for request in upsert_requests(collection, documents, batch_size):
            part = self.ingest_stub.Upsert(request, timeout=900)
            for name in ("documents_received", "documents_written", "documents_unchanged", "chunks_written"):
                setattr(total, name, getattr(total, name) + getattr(part, name))
            if on_batch:
                on_batch(part)
        return total

    def stats(self, collection: str) -> ingest_pb2.StatsResponse:
        return self.ingest_stub.Stats(ingest_pb2.StatsRequest(collection=collection), timeout=60)

    def delete(self, collection: str, ids: list[str]) -> ingest_pb2.DeleteResponse:
        return self.ingest_stub.Delete(ingest_pb2.DeleteRequest(collection=collection, ids=ids), timeout=60)

    def close(self) -> None:
        self.channel.close()
