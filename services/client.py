"""A small synchronous client for the gateway, used by the CLI and the benchmark."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from hybridsearch.common.access import gateway_access
from hybridsearch.common.iterables import batched
from hybridsearch.v1 import common_pb2, ingest_pb2, ingest_pb2_grpc, search_pb2, search_pb2_grpc

MODES = {"bm25": common_pb2.RETRIEVAL_MODE_BM25, "vector": common_pb2.RETRIEVAL_MODE_VECTOR,
         "hybrid": common_pb2.RETRIEVAL_MODE_HYBRID}
EFFORTS = {"fast": common_pb2.EFFORT_FAST, "balanced": common_pb2.EFFORT_BALANCED,
           "thorough": common_pb2.EFFORT_THOROUGH}


class GatewayClient:
    def __init__(self, address: str, api_key: str | None = None) -> None:
        # TLS and the API key as configured (HYBRIDSEARCH_API_KEY, else the local admin key): common/access.py
        self.channel, self.metadata = gateway_access(address, api_key)
        self.search_stub = search_pb2_grpc.SearchServiceStub(self.channel)
        self.ingest_stub = ingest_pb2_grpc.IngestServiceStub(self.channel)

    def search(self, request: search_pb2.SearchRequest, timeout: float = 60.0) -> search_pb2.SearchResponse:
        return self.search_stub.Search(request, timeout=timeout, metadata=self.metadata)

    def index(self, collection: str, documents: Iterable[ingest_pb2.Document], batch_size: int = 64,
              on_batch: Callable[[ingest_pb2.UpsertResponse], None] | None = None) -> ingest_pb2.UpsertResponse:
        total = ingest_pb2.UpsertResponse()
        for batch in batched(documents, batch_size):
            part = self.ingest_stub.Upsert(ingest_pb2.UpsertRequest(collection=collection, documents=batch), timeout=900,
                                           metadata=self.metadata)
            for name in ("documents_received", "documents_written", "documents_unchanged", "chunks_written"):
                setattr(total, name, getattr(total, name) + getattr(part, name))
            if on_batch:
                on_batch(part)
        return total

    def stats(self, collection: str) -> ingest_pb2.StatsResponse:
        return self.ingest_stub.Stats(ingest_pb2.StatsRequest(collection=collection), timeout=60, metadata=self.metadata)

    def delete(self, collection: str, ids: list[str]) -> ingest_pb2.DeleteResponse:
        return self.ingest_stub.Delete(ingest_pb2.DeleteRequest(collection=collection, ids=ids), timeout=60,
                                       metadata=self.metadata)

    def close(self) -> None:
        self.channel.close()
