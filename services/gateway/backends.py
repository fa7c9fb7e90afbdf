"""The gateway's connections to the internal services and to Triton; a co-locatable service the topology puts inside
the gateway (topology.in_gateway) is answered in this process instead, behind the same interface (expansion's
servicer: expansion.in_process; fusion's library: gateway.query.fuse)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import grpc

from hybridsearch.runtime import services
from hybridsearch.config.settings import Settings
from hybridsearch.expansion.in_process import InProcessExpansion
from hybridsearch.runtime.server import internal_channel
from hybridsearch.reranker.client import RerankerClient
from hybridsearch.v1 import bm25_pb2_grpc, expansion_pb2_grpc, fusion_pb2_grpc, vector_pb2_grpc


@dataclass
class Backends:
    bm25: bm25_pb2_grpc.Bm25ServiceStub
    vector: vector_pb2_grpc.VectorServiceStub
    expansion: expansion_pb2_grpc.ExpansionServiceStub | InProcessExpansion
    fusion: fusion_pb2_grpc.FusionServiceStub
    reranker: RerankerClient
    channels: list

    @classmethod
    def connect(cls, settings: Settings, dial: Callable[[str], grpc.aio.Channel] | None = None) -> Backends:
        """`dial(name)` opens the channel to an internal service (by default internal_channel to its address; the
        hop table's tool records the calls through its own)."""
        dial = dial or (lambda name: internal_channel(settings.endpoints.addr(name)))
        # expansion inside the gateway is dialled by no channel (fusion's stub stays: its own fallback path)
        expansion_here = "expansion" in settings.topology.in_gateway
        channels = {name: dial(name) for name in services.INTERNAL if not (name == "expansion" and expansion_here)}
        bm25 = bm25_pb2_grpc.Bm25ServiceStub(channels["bm25"])
        return cls(
            bm25=bm25,
            vector=vector_pb2_grpc.VectorServiceStub(channels["vector"]),
            expansion=(InProcessExpansion(settings, bm25) if expansion_here
                       else expansion_pb2_grpc.ExpansionServiceStub(channels["expansion"])),
            fusion=fusion_pb2_grpc.FusionServiceStub(channels["fusion"]),
            reranker=RerankerClient(settings.rerank),
            channels=list(channels.values()),
        )

    async def start(self) -> None:
        """What a part answered in this process needs before the first query (expansion's detector loaded)."""
        if isinstance(self.expansion, InProcessExpansion):
            await self.expansion.start()

    async def close(self) -> None:
        if isinstance(self.expansion, InProcessExpansion):
            await self.expansion.close()
        for channel in self.channels:
            await channel.close()
        await self.reranker.close()
