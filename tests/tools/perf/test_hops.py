"""The hop table's parts (tools/perf/hops.py) against a real fusion service on a loopback port: the recording
interceptor captures a call's method, request and answer as the gateway made it, a replay sends the same
bytes again, the fusion library's own CPU is measured on the recorded request, and a bare echo of given
sizes costs something on both sides; the ratio is (hop - engine) / echo."""

from __future__ import annotations

import math

import grpc
import pytest

from hybridsearch.config.settings import Settings
from hybridsearch.fusion.params import params_from_settings, params_to_proto
from hybridsearch.fusion.service import FusionServicer
from hybridsearch.tools.perf.hops import HopRow, Recorded, _Recorder, _replay, echo_cost, fusion_engine_ms, markdown
from hybridsearch.v1 import common_pb2, fusion_pb2, fusion_pb2_grpc

LISTS = [common_pb2.RankedList(leg=leg, kind=common_pb2.QUERY_KIND_ORIGINAL, hits=[
    common_pb2.LegHit(doc_id=f"d{i}", chunk_id=f"d{i}#0", score=10.0 - i, rank=i + 1) for i in range(50)])
    for leg in (common_pb2.LEG_BM25, common_pb2.LEG_VECTOR)]


@pytest.fixture
async def fusion_port():
    server = grpc.aio.server()
    fusion_pb2_grpc.add_FusionServiceServicer_to_server(FusionServicer(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    yield port
    await server.stop(None)


async def test_a_recorded_call_replays_byte_for_byte_and_the_library_cost_is_measured(fusion_port):
    made: list = []
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{fusion_port}", interceptors=[_Recorder("fusion", made)])
    config = params_to_proto(params_from_settings(Settings().fusion))  # resolved, as the gateway sends it
    request = fusion_pb2.FuseRequest(lists=LISTS, limit=100, config=config)
    async with channel:
        answer = await fusion_pb2_grpc.FusionServiceStub(channel).Fuse(request)
    [(service, method, sent, got)] = made
    assert (service, method) == ("fusion", "/hybridsearch.v1.FusionService/Fuse")
    assert sent == request.SerializeToString() and got == answer.SerializeToString() and len(answer.hits) == 50
    rpc = Recorded(service, method, [sent], [got], {"fast": 1.0})
    settings = Settings(endpoints={"fusion_addr": f"127.0.0.1:{fusion_port}"})
    caller_s, wall_s, engine = await _replay(settings, rpc, 50)
    assert caller_s > 0 and wall_s > 0 and engine == 0.0  # Fuse answers carry no engine time
    assert 0 < fusion_engine_ms([sent], 50) < 50


def test_a_bare_echo_costs_cpu_on_both_sides_and_more_when_it_waits():
    caller, server = echo_cost(200, 20_000, 100)
    assert caller > 0 and server > 0
    waiting = sum(echo_cost(200, 20_000, 100, wait_s=0.01))
    assert waiting > caller + server  # woken threads: a call that lasts costs gRPC more than one answered at once


def test_the_tax_is_what_the_hop_costs_beyond_its_engine_in_echoes_and_the_table_shows_it():
    row = HopRow("bm25.Search", {"fast": 1.0}, 134, 38_000, 300, caller_cpu_ms=0.3, server_cpu_ms=2.3, engine_ms=1.7,
                 echo_caller_cpu_ms=0.2, echo_server_cpu_ms=0.2)
    assert math.isclose(row.tax, (0.3 + 2.3 - 1.7) / 0.4)
    assert row.as_dict()["tax"] == 2.25
    table = markdown([row], ["fast", "balanced"])
    assert "| bm25.Search | 1.00 | 0.00 | 134 | 38000 | 0.300 | 2.300 | 1.700 | 0.400 | 2.2x | - | 2.2x |" in table
    waited = HopRow("vector.Search", {"fast": 1.0}, 181, 51_000, 300, caller_cpu_ms=0.6, server_cpu_ms=11.0,
                    engine_ms=9.8, echo_caller_cpu_ms=0.2, echo_server_cpu_ms=0.2, waiting_echo_cpu_ms=0.9)
    assert math.isclose(waited.waiting_tax, (0.6 + 11.0 - 9.8) / 0.9) and waited.as_dict()["waiting_tax"] == 2.0
    assert "| 0.400 | 4.5x | 0.900 | 2.0x |" in markdown([waited], ["fast"])
