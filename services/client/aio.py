"""The asyncio client of the gateway: the same typed methods as GatewayClient, awaited.

    async with AsyncGatewayClient("127.0.0.1:50051") as client:
        response = await client.search("rank fusion", collection="notes", effort="fast")
"""

from __future__ import annotations

from collections.abc import AsyncIterable, Callable, Iterable, Sequence

import grpc

from hybridsearch.client.errors import from_rpc_error
from hybridsearch.client.requests import add_counts, search_request, upsert_requests
from hybridsearch.client.sync import SEARCH_TIMEOUT_S, WRITE_TIMEOUT_S
from hybridsearch.security.access import aio_gateway_channel
from hybridsearch.config.settings import Settings, get_settings
from hybridsearch.runtime.server import CHANNEL_OPTIONS, RETRY_OPTIONS
from hybridsearch.v1 import (
    collections_pb2,
    collections_pb2_grpc,
    ingest_pb2,
    ingest_pb2_grpc,
    search_pb2,
    search_pb2_grpc,
)


async def _call(method, request, timeout: float | None):
    try:
        return await method(request, timeout=timeout)
    except grpc.RpcError as err:
        raise from_rpc_error(err) from err


class AsyncGatewayClient:
    def __init__(self, address: str | None = None, api_key: str | None = None, *,
                 settings: Settings | None = None, act_for: Sequence[str] = ()) -> None:
        settings = settings or get_settings()
        self.address = address or settings.endpoints.addr("gateway")
        self.channel = aio_gateway_channel(self.address, [*CHANNEL_OPTIONS, *RETRY_OPTIONS], key=api_key,
                                           settings=settings, act_for=act_for)
        self.search_stub = search_pb2_grpc.SearchServiceStub(self.channel)
        self.ingest_stub = ingest_pb2_grpc.IngestServiceStub(self.channel)
        self.collections_stub = collections_pb2_grpc.CollectionServiceStub(self.channel)

    async def search(self, query: str | search_pb2.SearchRequest, *, timeout: float = SEARCH_TIMEOUT_S,
                     **options) -> search_pb2.SearchResponse:
        request = query if isinstance(query, search_pb2.SearchRequest) else search_request(query, **options)
        return await _call(self.search_stub.Search, request, timeout)

    async def explain(self, query: str, *, timeout: float = SEARCH_TIMEOUT_S, **options) -> search_pb2.SearchResponse:
        return await self.search(query, timeout=timeout, explain=True, **options)

    async def upsert(self, collection: str, documents: Iterable[ingest_pb2.Document], batch_size: int = 64,
                     on_batch: Callable[[ingest_pb2.UpsertResponse], None] | None = None,
                     timeout: float = WRITE_TIMEOUT_S) -> ingest_pb2.UpsertResponse:
        total = ingest_pb2.UpsertResponse()
        for request in upsert_requests(collection, documents, batch_size):
            part = await _call(self.ingest_stub.Upsert, request, timeout)
            add_counts(total, part)
            if on_batch:
                on_batch(part)
        return total

    async def upsert_stream(self, collection: str, documents: Iterable[ingest_pb2.Document], batch_size: int = 64,
                            timeout: float = WRITE_TIMEOUT_S) -> ingest_pb2.UpsertResponse:
        async def batches() -> AsyncIterable[ingest_pb2.UpsertRequest]:
            for request in upsert_requests(collection, documents, batch_size):
                yield request
        return await _call(self.ingest_stub.UpsertStream, batches(), timeout)

    async def delete(self, collection: str, ids: list[str], timeout: float = SEARCH_TIMEOUT_S) -> ingest_pb2.DeleteResponse:
        return await _call(self.ingest_stub.Delete, ingest_pb2.DeleteRequest(collection=collection, ids=ids), timeout)

    async def stats(self, collection: str, timeout: float = SEARCH_TIMEOUT_S) -> ingest_pb2.StatsResponse:
        return await _call(self.ingest_stub.Stats, ingest_pb2.StatsRequest(collection=collection), timeout)

    async def get_documents(self, collection: str, ids: list[str],
                      timeout: float = SEARCH_TIMEOUT_S) -> collections_pb2.GetDocumentsResponse:
        """Whole documents by id (at most 100): text, title, metadata and chunk spans; ids the collection
        does not hold come back in `missing`. NotFound when the collection does not exist."""
        request = collections_pb2.GetDocumentsRequest(collection=collection, ids=ids)
        return await _call(self.collections_stub.GetDocuments, request, timeout)

    async def list_collections(self, timeout: float = SEARCH_TIMEOUT_S) -> collections_pb2.ListCollectionsResponse:
        """The collections the key may read: counts per store, language, declared options."""
        return await _call(self.collections_stub.ListCollections, collections_pb2.ListCollectionsRequest(), timeout)

    async def drop_collection(self, collection: str,
                        timeout: float = SEARCH_TIMEOUT_S) -> collections_pb2.DropCollectionResponse:
        """Removes a collection from both stores and its cached entries (idempotent: `existed` says whether
        there was one). FailedPrecondition while a reconcile holds it."""
        request = collections_pb2.DropCollectionRequest(collection=collection)
        return await _call(self.collections_stub.DropCollection, request, timeout)

    async def close(self) -> None:
        await self.channel.close()

    async def __aenter__(self) -> AsyncGatewayClient:
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()
