"""The gateway's connections to the internal services and to Triton."""

from __future__ import annotations

from dataclasses import dataclass

from hybridsearch.runtime import services
from hybridsearch.config.settings import Settings
from hybridsearch.runtime.server import internal_channel
from hybridsearch.reranker.client import RerankerClient
from hybridsearch.v1 import bm25_pb2_grpc, expansion_pb2_grpc, fusion_pb2_grpc, vector_pb2_grpc


@dataclass
class Backends:
    bm25: bm25_pb2_grpc.Bm25ServiceStub
    vector: vector_pb2_grpc.VectorServiceStub
    expansion: expansion_pb2_grpc.ExpansionServiceStub
    fusion: fusion_pb2_grpc.FusionServiceStub
    reranker: RerankerClient
    channels: list

    @classmethod
    def connect(cls, settings: Settings) -> Backends:
        ep = settings.endpoints
        channels = {name: internal_channel(ep.addr(name)) for name in services.INTERNAL}
        return cls(
            bm25=bm25_pb2_grpc.Bm25ServiceStub(channels["bm25"]),
            vector=vector_pb2_grpc.VectorServiceStub(channels["vector"]),
            expansion=expansion_pb2_grpc.ExpansionServiceStub(channels["expansion"]),
            fusion=fusion_pb2_grpc.FusionServiceStub(channels["fusion"]),
            reranker=RerankerClient(settings.rerank),
            channels=list(channels.values()),
        )

    async def close(self) -> None:
        for channel in self.channels:
            await channel.close()
        await self.reranker.close()
