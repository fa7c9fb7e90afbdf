"""The store services seen from a caller that is not the gateway (reconcile, key rotation): a stub for each
store of the service table (runtime.services.Store), each on an internal channel of its own."""

from __future__ import annotations

import grpc

from hybridsearch.runtime.server import internal_channel
from hybridsearch.runtime.services import Store
from hybridsearch.v1 import bm25_pb2_grpc, vector_pb2_grpc

STUBS = {Store.BM25: bm25_pb2_grpc.Bm25ServiceStub, Store.VECTOR: vector_pb2_grpc.VectorServiceStub}


def store_stubs(endpoints) -> tuple[list[grpc.aio.Channel], dict]:
    """(the channels, to close; a stub by store), dialled at `endpoints` (config.deployment.Endpoints)."""
    channels = {store: internal_channel(endpoints.addr(store.value)) for store in Store}
    return list(channels.values()), {store: STUBS[store](channel) for store, channel in channels.items()}
