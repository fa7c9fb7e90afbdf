"""CollectionService: collections and their documents as resources. Thin: each RPC is one module's work
(gateway/resources/documents.py fetches, gateway/resources/catalog.py lists, gateway/resources/drop.py drops); the access check has run
before (gateway/access/auth.py), and ListCollections lists only what the caller's key may read."""

from __future__ import annotations

import grpc

from hybridsearch.config.settings import Settings
from hybridsearch.security.sealing import Sealer
from hybridsearch.contract.validation import check_collection
from hybridsearch.contract.errors import Refusal, abort_invalid
from hybridsearch.config.collections import collection_config
from hybridsearch.gateway.access.auth import readable, readers
from hybridsearch.gateway.backends import Backends
from hybridsearch.gateway.resources.catalog import Catalog
from hybridsearch.gateway.resources.documents import get_documents
from hybridsearch.gateway.resources.drop import Dropper
from hybridsearch.gateway.ingest.write_order import WriteOrder
from hybridsearch.v1 import collections_pb2, collections_pb2_grpc


class CollectionServicer(collections_pb2_grpc.CollectionServiceServicer):
    def __init__(self, settings: Settings, backends: Backends, catalog: Catalog, order: WriteOrder | None = None) -> None:
        self.settings, self.backends, self.catalog = settings, backends, catalog
        self.auth_on = settings.auth.keys_file is not None
        self.redis = order.redis if order is not None else settings.redis.state()
        cache = settings.redis.cache(timeout_s=5)
        # drops ordered with the gateway's writes, their page orders and expansions purged from the cache
        self.dropper = Dropper(backends, self.redis, cache, order, catalog.aliases)
        self.sealer = Sealer(settings)  # GetDocuments opens a sealed collection's chunks (gateway/resources/documents.py)

    async def GetDocuments(self, request: collections_pb2.GetDocumentsRequest,
                           context: grpc.aio.ServicerContext) -> collections_pb2.GetDocumentsResponse:
        try:
            return await get_documents(request, self.backends, self.catalog, self.settings.chunk_overlap_words,
                                       self.sealer, lambda collection: readers(
                                           collection_config(self.settings, collection), self.auth_on))
        except Refusal as err:
            await abort_invalid(context, err)

    async def ListCollections(self, request: collections_pb2.ListCollectionsRequest,
                              context: grpc.aio.ServicerContext) -> collections_pb2.ListCollectionsResponse:
        try:
            return await self.catalog.listing(lambda name: bool(readable([name], self.auth_on)), lambda name: readers(
                collection_config(self.settings, name), self.auth_on))
        except grpc.aio.AioRpcError as err:
            await context.abort(grpc.StatusCode.UNAVAILABLE, f"no store answered ({err.details()}); retry")

    async def DropCollection(self, request: collections_pb2.DropCollectionRequest,
                             context: grpc.aio.ServicerContext) -> collections_pb2.DropCollectionResponse:
        try:
            collection = check_collection(request.collection)
            dropped = await self.dropper.drop(collection)
        except Refusal as err:
            await abort_invalid(context, err)
        self.catalog.forget(collection)
        return dropped

    async def close(self) -> None:
        await self.redis.aclose()
