"""A leg is its module and one row of the leg table: a fourth leg, defined in this file only, with its own
service (a real gRPC server on loopback), registered by adding its row, searched through the query path
end to end (retrieval, fusion in the fusion servicer, calibration, the answer's evidence and explain) and
reported like the others when its service fails. No other file is edited for it."""

from __future__ import annotations

import dataclasses

import grpc
import pytest
from query_standins import backends, run

from hybridsearch.query import legs
from hybridsearch.config.settings import Settings
from hybridsearch.gateway.query.legs import registry
from hybridsearch.gateway.query.report import FAILED, OK
from hybridsearch.v1 import bm25_pb2_grpc, common_pb2

FAKE = 99  # a Leg value the proto enum does not name (proto3 enums are open)
FAST = common_pb2.EFFORT_FAST


class FakeService(bm25_pb2_grpc.Bm25ServiceServicer):
    """The fourth leg's own service: it answers "z" documents nobody else finds."""

    def __init__(self) -> None:
        self.calls, self.fail = 0, False

    async def Search(self, request, context):
        self.calls += 1
        if self.fail:
            await context.abort(grpc.StatusCode.UNAVAILABLE, "fake leg down")
        return common_pb2.LegSearchResponse(engine="fake engine", lists=[
            common_pb2.RankedList(leg=FAKE, kind=q.kind, query=q.text, hits=[
                common_pb2.LegHit(doc_id=f"z{i}", chunk_id=f"z{i}#0", title=f"z{i}", text=f"zebra {i}",
                                  score=5.0 - i, rank=i + 1) for i in range(3)])
            for q in request.queries])


STUB: dict[str, bm25_pb2_grpc.Bm25ServiceStub] = {}


@dataclasses.dataclass(frozen=True)
class FakeLeg:
    """The fourth leg, as gateway.query.legs.protocol.RetrievalLeg says a leg is."""

    leg: int
    name: str
    part: str = "fake"
    off: str = "mode"
    kinds: frozenset[int] = frozenset({common_pb2.QUERY_KIND_ORIGINAL})

    def used_by(self, plan) -> bool:
        return plan.mode == common_pb2.RETRIEVAL_MODE_HYBRID

    def request(self, base, plan, settings):
        return base

    def call(self, backends, request, timeout):
        return STUB["fake"].Search(request, timeout=timeout)


@pytest.fixture
async def fake_leg(monkeypatch):
    service = FakeService()
    server = grpc.aio.server()
    bm25_pb2_grpc.add_Bm25ServiceServicer_to_server(service, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
    STUB["fake"] = bm25_pb2_grpc.Bm25ServiceStub(channel)
    # Its row of the leg table: the only registration there is.
    row = legs.LegSpec("fake", FAKE, weight=0.5, rrf_weight=1.0, gateway=f"{__name__}:FakeLeg")
    monkeypatch.setattr(legs, "SPECS", (*legs.SPECS, row))
    monkeypatch.setattr(registry, "LEGS", registry.build(legs.SPECS))
    yield service
    await channel.close()
    await server.stop(None)


async def test_a_fourth_leg_is_searched_fused_and_explained(fake_leg):
    s = Settings()
    assert s.fusion.leg_weights["fake"] == 0.5  # its weights come from its row, settable by its name
    answer, report = await run(backends(), s=s, effort=FAST, explain=True, top_k=20)
    assert fake_leg.calls == 1 and report.legs["fake"].state == OK and report.legs["fake"].reason == "fake engine"
    response = answer.response
    assert {rl.leg for rl in response.explain.leg_lists} == {common_pb2.LEG_BM25, common_pb2.LEG_VECTOR, FAKE}
    found = {h.doc_id: h for h in response.hits}
    assert {"z0", "z1", "z2"} <= set(found)  # fused in with the other legs' hits
    assert [leg.leg for leg in found["z0"].legs] == [FAKE] and 0 < found["z0"].score <= 1
    assert "fake" in response.explain.fusion.leg_weights


async def test_a_failed_fourth_leg_degrades_like_any_other(fake_leg):
    fake_leg.fail = True
    answer, report = await run(backends(), s=Settings(), effort=FAST)
    assert report.legs["fake"].state == FAILED and "fake leg down" in report.legs["fake"].reason
    assert answer.response.degraded and not any(h.doc_id.startswith("z") for h in answer.response.hits)
