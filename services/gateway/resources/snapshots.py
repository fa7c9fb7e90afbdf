"""SnapshotService: snapshots of a collection and restores of them (admin only: gateway/access/auth.py). Thin: each
RPC is hybridsearch.snapshots.coordinator's work."""

from __future__ import annotations

import grpc

from hybridsearch.contract.errors import Refusal, abort_invalid
from hybridsearch.snapshots.coordinator import Snapshots
from hybridsearch.v1 import snapshots_pb2, snapshots_pb2_grpc


class SnapshotServicer(snapshots_pb2_grpc.SnapshotServiceServicer):
    def __init__(self, snapshots: Snapshots) -> None:
        self.snapshots = snapshots

    async def CreateSnapshot(self, request: snapshots_pb2.CreateSnapshotRequest,
                             context: grpc.aio.ServicerContext) -> snapshots_pb2.CreateSnapshotResponse:
        try:
            return await self.snapshots.create(request.collection, request.repository)
        except Refusal as err:
            await abort_invalid(context, err)

    async def ListSnapshots(self, request: snapshots_pb2.ListSnapshotsRequest,
                            context: grpc.aio.ServicerContext) -> snapshots_pb2.ListSnapshotsResponse:
        try:
            return await self.snapshots.list(request.repository, request.collection)
        except Refusal as err:
            await abort_invalid(context, err)

    async def RestoreSnapshot(self, request: snapshots_pb2.RestoreSnapshotRequest,
                              context: grpc.aio.ServicerContext) -> snapshots_pb2.RestoreSnapshotResponse:
        try:
            return await self.snapshots.restore(request.location, request.collection)
        except Refusal as err:
            await abort_invalid(context, err)

    async def DeleteSnapshot(self, request: snapshots_pb2.DeleteSnapshotRequest,
                             context: grpc.aio.ServicerContext) -> snapshots_pb2.DeleteSnapshotResponse:
        try:
            return await self.snapshots.delete(request.location)
        except Refusal as err:
            await abort_invalid(context, err)
