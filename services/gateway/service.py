"""Gateway process: SearchService, IngestService, CollectionService, SnapshotService and AliasService on one port."""

from __future__ import annotations

import grpc

from hybridsearch.config.settings import get_settings
from hybridsearch.runtime.server import serve
from hybridsearch.gateway.resources.alias_service import AliasServicer
from hybridsearch.gateway.access.auth import gateway_interceptors
from hybridsearch.gateway.backends import Backends
from hybridsearch.gateway.resources.catalog import Catalog
from hybridsearch.gateway.resources.collections import CollectionServicer
from hybridsearch.gateway.ingest.servicer import IngestServicer
from hybridsearch.gateway.resources.reindex import Reindexer
from hybridsearch.gateway.query.search import SearchServicer
from hybridsearch.gateway.resources.snapshots import SnapshotServicer
from hybridsearch.gateway.ingest.write_order import WriteOrder
from hybridsearch.snapshots.coordinator import Snapshots
from hybridsearch.v1 import (
    aliases_pb2,
    aliases_pb2_grpc,
    collections_pb2,
    collections_pb2_grpc,
    ingest_pb2,
    ingest_pb2_grpc,
    search_pb2,
    search_pb2_grpc,
    snapshots_pb2,
    snapshots_pb2_grpc,
)


async def main() -> None:
    settings = get_settings()
    backends = Backends.connect(settings)
    await backends.start()
    # Writes and drops of a collection in one order (gateway/ingest/write_order.py), through the state Redis.
    order = WriteOrder(settings.redis.state())
    # Which collections exist (searches, Stats, CollectionService, snapshots): a restore's mark hides a half-made one.
    catalog = Catalog(settings, backends, order.redis)
    collections = CollectionServicer(settings, backends, catalog, order)
    snapshots = SnapshotServicer(Snapshots(settings, backends, catalog, order))
    aliases = AliasServicer(Reindexer(settings, backends, catalog, order), collections.dropper)

    async def register(server: grpc.aio.Server) -> list[str]:
        search_pb2_grpc.add_SearchServiceServicer_to_server(SearchServicer(settings, backends, catalog), server)
        ingest_pb2_grpc.add_IngestServiceServicer_to_server(IngestServicer(settings, backends, catalog, order), server)
        collections_pb2_grpc.add_CollectionServiceServicer_to_server(collections, server)
        snapshots_pb2_grpc.add_SnapshotServiceServicer_to_server(snapshots, server)
        aliases_pb2_grpc.add_AliasServiceServicer_to_server(aliases, server)
        return [
            search_pb2.DESCRIPTOR.services_by_name["SearchService"].full_name,
            ingest_pb2.DESCRIPTOR.services_by_name["IngestService"].full_name,
            collections_pb2.DESCRIPTOR.services_by_name["CollectionService"].full_name,
            snapshots_pb2.DESCRIPTOR.services_by_name["SnapshotService"].full_name,
            aliases_pb2.DESCRIPTOR.services_by_name["AliasService"].full_name,
        ]

    async def stop() -> None:
        await collections.close()
        await backends.close()

    await serve("gateway", settings.endpoints.gateway_port, register, on_stop=stop,
                interceptors=gateway_interceptors(settings))
