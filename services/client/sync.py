"""The blocking client of the gateway: search, upsert (batched or streamed), delete, stats, explain, and
collections as resources (get_documents, list_collections, drop_collection).

    from hybridsearch.client import GatewayClient
    with GatewayClient("127.0.0.1:50051") as client:
        client.upsert("notes", [document("n1", "Reciprocal rank fusion merges ranked lists.")])
        for hit in client.search("rank fusion", collection="notes", top_k=5).hits:
            print(hit.doc_id, hit.score)

Every call has a deadline (`timeout`, seconds); UNAVAILABLE is retried by gRPC's retry policy (every
public RPC is idempotent: upserts are keyed by content hash); other errors raise the typed exceptions
of hybridsearch.client.errors at once. TLS and the API key come from settings (HYBRIDSEARCH_API_KEY,
HYBRIDSEARCH_TLS__*) or the arguments: security/access.py.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence

import grpc

from hybridsearch.client.errors import from_rpc_error
from hybridsearch.client.requests import add_counts, search_request, upsert_requests
from hybridsearch.security.access import gateway_channel
from hybridsearch.config.settings import Settings, get_settings
from hybridsearch.runtime.server import CHANNEL_OPTIONS, RETRY_OPTIONS
from hybridsearch.v1 import (
    collections_pb2,
    collections_pb2_grpc,
    ingest_pb2,
    ingest_pb2_grpc,
    search_pb2,
    search_pb2_grpc,
    snapshots_pb2,
    snapshots_pb2_grpc,
    aliases_pb2,
    aliases_pb2_grpc,
)

SEARCH_TIMEOUT_S = 60.0
WRITE_TIMEOUT_S = 900.0  # one batch: chunked, embedded and written to both stores before the answer
SNAPSHOT_TIMEOUT_S = 3600.0  # a snapshot or a restore: every file of the collection read or written


def _call(method, request, timeout: float | None):
    try:
        return method(request, timeout=timeout)
    except grpc.RpcError as err:
        raise from_rpc_error(err) from err


class GatewayClient:
    def __init__(self, address: str | None = None, api_key: str | None = None, *,
                 settings: Settings | None = None, act_for: Sequence[str] = ()) -> None:
        """`act_for`: the principals of the user this client searches for (`user:ana`, `group:eng`), which the key
        must be allowed to assert (`keys create --may-act-for`); none: the key's own."""
        settings = settings or get_settings()
        self.address = address or settings.endpoints.addr("gateway")
        self.channel = gateway_channel(self.address, [*CHANNEL_OPTIONS, *RETRY_OPTIONS], key=api_key, settings=settings,
                                       act_for=act_for)
        self.search_stub = search_pb2_grpc.SearchServiceStub(self.channel)
        self.ingest_stub = ingest_pb2_grpc.IngestServiceStub(self.channel)
        self.collections_stub = collections_pb2_grpc.CollectionServiceStub(self.channel)
        self.snapshots_stub = snapshots_pb2_grpc.SnapshotServiceStub(self.channel)
        self.aliases_stub = aliases_pb2_grpc.AliasServiceStub(self.channel)

    def search(self, query: str | search_pb2.SearchRequest, *, timeout: float = SEARCH_TIMEOUT_S,
               **options) -> search_pb2.SearchResponse:
        """A search: a query and keyword options (client.requests.search_request), or a SearchRequest."""
        request = query if isinstance(query, search_pb2.SearchRequest) else search_request(query, **options)
        return _call(self.search_stub.Search, request, timeout)

    def explain(self, query: str, *, timeout: float = SEARCH_TIMEOUT_S, **options) -> search_pb2.SearchResponse:
        """The search with its explanation (`client.requests.explain_lines(response)` reads it out)."""
        return self.search(query, timeout=timeout, explain=True, **options)

    def upsert(self, collection: str, documents: Iterable[ingest_pb2.Document], batch_size: int = 64,
               on_batch: Callable[[ingest_pb2.UpsertResponse], None] | None = None,
               timeout: float = WRITE_TIMEOUT_S) -> ingest_pb2.UpsertResponse:
        """Writes documents in batches, each acknowledged by both stores; returns the summed counts."""
        total = ingest_pb2.UpsertResponse()
        for request in upsert_requests(collection, documents, batch_size):
            part = _call(self.ingest_stub.Upsert, request, timeout)
            add_counts(total, part)
            if on_batch:
                on_batch(part)
        return total

    index = upsert  # the earlier name

    def upsert_stream(self, collection: str, documents: Iterable[ingest_pb2.Document], batch_size: int = 64,
                      timeout: float = WRITE_TIMEOUT_S) -> ingest_pb2.UpsertResponse:
        """One client stream of batches: a failure names what was committed (errors.HybridSearchError.message)."""
        return _call(self.ingest_stub.UpsertStream, upsert_requests(collection, documents, batch_size), timeout)

    def delete(self, collection: str, ids: list[str], timeout: float = SEARCH_TIMEOUT_S) -> ingest_pb2.DeleteResponse:
        return _call(self.ingest_stub.Delete, ingest_pb2.DeleteRequest(collection=collection, ids=ids), timeout)

    def stats(self, collection: str, timeout: float = SEARCH_TIMEOUT_S) -> ingest_pb2.StatsResponse:
        return _call(self.ingest_stub.Stats, ingest_pb2.StatsRequest(collection=collection), timeout)

    def get_documents(self, collection: str, ids: list[str],
                      timeout: float = SEARCH_TIMEOUT_S) -> collections_pb2.GetDocumentsResponse:
        """Whole documents by id (at most 100): text, title, metadata and chunk spans; ids the collection
        does not hold come back in `missing`. NotFound when the collection does not exist."""
        request = collections_pb2.GetDocumentsRequest(collection=collection, ids=ids)
        return _call(self.collections_stub.GetDocuments, request, timeout)

    def list_collections(self, timeout: float = SEARCH_TIMEOUT_S) -> collections_pb2.ListCollectionsResponse:
        """The collections the key may read: counts per store, language, declared options."""
        return _call(self.collections_stub.ListCollections, collections_pb2.ListCollectionsRequest(), timeout)

    def drop_collection(self, collection: str,
                        timeout: float = SEARCH_TIMEOUT_S) -> collections_pb2.DropCollectionResponse:
        """Removes a collection from both stores and its cached entries (idempotent: `existed` says whether
        there was one). FailedPrecondition while a reconcile holds it."""
        request = collections_pb2.DropCollectionRequest(collection=collection)
        return _call(self.collections_stub.DropCollection, request, timeout)

    def create_snapshot(self, collection: str, repository: str = "",
                        timeout: float = SNAPSHOT_TIMEOUT_S) -> snapshots_pb2.SnapshotInfo:
        """A snapshot of the collection in `repository` (a folder, s3://bucket/prefix; empty: the deployment's);
        admin keys only. Its `location` is what restore_snapshot and delete_snapshot take."""
        request = snapshots_pb2.CreateSnapshotRequest(collection=collection, repository=repository)
        return _call(self.snapshots_stub.CreateSnapshot, request, timeout).snapshot

    def list_snapshots(self, collection: str = "", repository: str = "",
                       timeout: float = SEARCH_TIMEOUT_S) -> snapshots_pb2.ListSnapshotsResponse:
        request = snapshots_pb2.ListSnapshotsRequest(collection=collection, repository=repository)
        return _call(self.snapshots_stub.ListSnapshots, request, timeout)

    def restore_snapshot(self, location: str, collection: str = "",
                         timeout: float = SNAPSHOT_TIMEOUT_S) -> snapshots_pb2.RestoreSnapshotResponse:
        """The snapshot restored as `collection` (default: its own name), which must not exist."""
        request = snapshots_pb2.RestoreSnapshotRequest(location=location, collection=collection)
        return _call(self.snapshots_stub.RestoreSnapshot, request, timeout)

    def delete_snapshot(self, location: str, timeout: float = SNAPSHOT_TIMEOUT_S) -> snapshots_pb2.DeleteSnapshotResponse:
        return _call(self.snapshots_stub.DeleteSnapshot, snapshots_pb2.DeleteSnapshotRequest(location=location), timeout)

    # Aliases and re-indexing (admin keys only; docs/operations.md "Re-indexing behind an alias").

    def reindex(self, collection: str, embedder: str = "", *, language: str = "", switch: bool = False,
                batch_documents: int = 0, timeout: float = SNAPSHOT_TIMEOUT_S) -> Iterator[aliases_pb2.ReindexResponse]:
        """A new generation of the collection built beside the serving one (another embedder, another BM25
        analysis language), its progress as it goes; the last message is BUILT (SWITCHED with `switch`). Run it
        again to finish one cut short."""
        request = aliases_pb2.ReindexRequest(collection=collection, embedder=embedder, language=language,
                                             switch_when_built=switch, batch_documents=batch_documents)
        try:
            yield from self.aliases_stub.Reindex(request, timeout=timeout)
        except grpc.RpcError as err:
            raise from_rpc_error(err) from err

    def get_alias(self, collection: str, timeout: float = SEARCH_TIMEOUT_S) -> aliases_pb2.AliasInfo:
        return _call(self.aliases_stub.GetAlias, aliases_pb2.GetAliasRequest(collection=collection), timeout).alias

    def list_aliases(self, timeout: float = SEARCH_TIMEOUT_S) -> aliases_pb2.ListAliasesResponse:
        return _call(self.aliases_stub.ListAliases, aliases_pb2.ListAliasesRequest(), timeout)

    def switch_alias(self, collection: str, generation: int, timeout: float = SEARCH_TIMEOUT_S) -> aliases_pb2.AliasInfo:
        request = aliases_pb2.SwitchAliasRequest(collection=collection, generation=generation)
        return _call(self.aliases_stub.SwitchAlias, request, timeout).alias

    def rollback_alias(self, collection: str, timeout: float = SEARCH_TIMEOUT_S) -> aliases_pb2.AliasInfo:
        return _call(self.aliases_stub.RollbackAlias, aliases_pb2.RollbackAliasRequest(collection=collection),
                     timeout).alias

    def drop_generation(self, collection: str, generation: int,
                        timeout: float = SEARCH_TIMEOUT_S) -> aliases_pb2.DropGenerationResponse:
        request = aliases_pb2.DropGenerationRequest(collection=collection, generation=generation)
        return _call(self.aliases_stub.DropGeneration, request, timeout)

    def close(self) -> None:
        self.channel.close()

    def __enter__(self) -> GatewayClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
