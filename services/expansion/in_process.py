"""The expansion service inside the gateway's process (topology.in_gateway names expansion): ExpansionServicer, the
same code the service runs, behind ExpansionServiceStub's interface (runtime.in_process), its BM25 probes over the
gateway's own channel. What it costs the gateway: the language detector's ~370 MB and ~3 s at start
(text/language.py); what it saves every expanded search: the hop (docs/performance.md, issue 35)."""

from __future__ import annotations

from hybridsearch.config.settings import Settings
from hybridsearch.expansion.service import ExpansionServicer
from hybridsearch.runtime.in_process import InProcessMethod
from hybridsearch.v1 import bm25_pb2_grpc, expansion_pb2


class InProcessExpansion:
    """ExpansionServiceStub's `Expand`, answered in this process."""

    def __init__(self, settings: Settings, bm25: bm25_pb2_grpc.Bm25ServiceStub) -> None:
        self.servicer = ExpansionServicer(settings, bm25)
        self.Expand: InProcessMethod[expansion_pb2.ExpandRequest, expansion_pb2.ExpandResponse] = \
            InProcessMethod(self.servicer.Expand)

    async def start(self) -> None:
        await self.servicer.start()

    async def close(self) -> None:
        await self.servicer.close()
