"""gateway/backends.py: the gateway dials every internal service but those its topology answers in its own process;
expansion inside the gateway is its servicer behind the stub's `Expand`, probing BM25 over the gateway's channel."""

from __future__ import annotations

import grpc

from hybridsearch.config.settings import Settings
from hybridsearch.expansion.in_process import InProcessExpansion
from hybridsearch.gateway.backends import Backends
from hybridsearch.runtime.server import internal_channel
from hybridsearch.v1 import expansion_pb2_grpc


def connect(inside: list[str]) -> tuple[Backends, list[str]]:
    settings = Settings()
    settings.topology.in_gateway = inside
    dialled: list[str] = []

    def dial(name: str) -> grpc.aio.Channel:
        dialled.append(name)
        return internal_channel(settings.endpoints.addr(name))
    return Backends.connect(settings, dial), dialled


async def test_expansion_inside_the_gateway_is_its_servicer_over_the_gateways_bm25_channel():
    backends, dialled = connect(["fusion", "expansion"])
    try:
        assert isinstance(backends.expansion, InProcessExpansion) and "expansion" not in dialled
        assert backends.expansion.servicer.bm25 is backends.bm25  # its probes: the gateway's channel, no other
        assert {"bm25", "vector", "fusion"} <= set(dialled)
    finally:
        await backends.close()


async def test_apart_every_internal_service_is_dialled():
    backends, dialled = connect([])
    try:
        assert isinstance(backends.expansion, expansion_pb2_grpc.ExpansionServiceStub)
        assert sorted(dialled) == ["bm25", "expansion", "fusion", "vector"]
    finally:
        await backends.close()
