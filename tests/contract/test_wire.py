"""The request guard: undecodable or oversized requests get INVALID_ARGUMENT / RESOURCE_EXHAUSTED, not UNKNOWN.

Real servers (the shared bootstrap's `create_server`, the real fusion and ingest servicers) on an
ephemeral loopback port, fed raw bytes through generic calls with no serializer.
"""

from __future__ import annotations

import grpc
import pytest

from hybridsearch.config.settings import get_settings
from hybridsearch.contract.limits import REQUEST_BYTES, human_bytes, receive_limit, request_limit
from hybridsearch.runtime.server import create_server
from hybridsearch.contract.errors import Refusal
from hybridsearch.contract.wire import guarded_decoder
from hybridsearch.fusion.params import params_from_settings, params_to_proto
from hybridsearch.fusion.service import FusionServicer
from hybridsearch.gateway.backends import Backends
from hybridsearch.gateway.ingest.servicer import IngestServicer
from hybridsearch.v1 import fusion_pb2, fusion_pb2_grpc, ingest_pb2, ingest_pb2_grpc, search_pb2

BAD_UTF8_FIELD_1 = b"\x0a\x02\xff\xfe"        # field 1 (a string everywhere below) holding invalid UTF-8
BAD_UTF8_NESTED = b"\x0a\x04\x1a\x02\xff\xfe"  # FuseRequest.lists[0].query holding invalid UTF-8
TRUNCATED = b"\x0a\x10abc"                     # a length that runs past the end
GARBAGE = b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01"


def test_limits_table():
    assert request_limit("/hybridsearch.v1.SearchService/Search") == REQUEST_BYTES["hybridsearch.v1.SearchService/Search"]
    assert request_limit("/grpc.health.v1.Health/Check") < request_limit("/hybridsearch.v1.IngestService/Upsert")
    assert receive_limit("gateway") == REQUEST_BYTES["hybridsearch.v1.IngestService/Upsert"]
    assert receive_limit("fusion") == REQUEST_BYTES["hybridsearch.v1.FusionService/Fuse"]
    assert receive_limit("bm25") == receive_limit("other") == max(REQUEST_BYTES.values())
    assert human_bytes(8 * 1024 * 1024) == "8 MiB" and human_bytes(1024) == "1 KiB" and human_bytes(1500) == "1500 bytes"


@pytest.mark.parametrize("data", [BAD_UTF8_FIELD_1, TRUNCATED, GARBAGE])
def test_decoder_refuses_what_does_not_decode(data):
    out = guarded_decoder("/hybridsearch.v1.SearchService/Search", search_pb2.SearchRequest.FromString, 100)(data)
    assert isinstance(out, Refusal) and out.code == grpc.StatusCode.INVALID_ARGUMENT
    assert str(out).startswith("request does not decode as hybridsearch.v1.SearchRequest: ")


def test_decoder_passes_messages_and_refuses_size():
    decode = guarded_decoder("/hybridsearch.v1.SearchService/Search", search_pb2.SearchRequest.FromString, 100)
    assert decode(search_pb2.SearchRequest(query="ok").SerializeToString()).query == "ok"
    out = decode(search_pb2.SearchRequest(query="x" * 200).SerializeToString())
    assert out.code == grpc.StatusCode.RESOURCE_EXHAUSTED and "100 bytes" in str(out)


@pytest.fixture
async def server():
    srv = create_server("test")
    backends = Backends.connect(get_settings())  # never reached: every request below is refused first
    fusion_pb2_grpc.add_FusionServiceServicer_to_server(FusionServicer(), srv)
    ingest_pb2_grpc.add_IngestServiceServicer_to_server(IngestServicer(get_settings(), backends), srv)
    port = srv.add_insecure_port("127.0.0.1:0")
    await srv.start()
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        yield channel
    await srv.stop(None)
    await backends.close()


async def _unary(channel, method, data):
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await channel.unary_unary(method)(data, timeout=10)
    return err.value


@pytest.mark.parametrize("data", [BAD_UTF8_NESTED, TRUNCATED, GARBAGE])
async def test_internal_service_answers_invalid_argument(server, data):
    err = await _unary(server, "/hybridsearch.v1.FusionService/Fuse", data)
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "does not decode as hybridsearch.v1.FuseRequest" in err.details()


async def test_valid_bytes_still_reach_the_servicer(server):
    config = params_to_proto(params_from_settings(get_settings().fusion))  # resolved, as the gateway sends it
    request = fusion_pb2.FuseRequest(limit=10, config=config).SerializeToString()
    reply = fusion_pb2.FuseResponse.FromString(
        await server.unary_unary("/hybridsearch.v1.FusionService/Fuse")(request, timeout=10))
    assert list(reply.hits) == []


async def test_oversized_request_is_resource_exhausted(server):
    data = ingest_pb2.StatsRequest(collection="x" * 2000).SerializeToString()
    err = await _unary(server, "/hybridsearch.v1.IngestService/Stats", data)
    assert err.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and "1 KiB" in err.details()


async def test_client_stream_message_that_does_not_decode(server):
    async def messages():
        yield BAD_UTF8_FIELD_1

    with pytest.raises(grpc.aio.AioRpcError) as err:
        await server.stream_unary("/hybridsearch.v1.IngestService/UpsertStream")(messages(), timeout=10)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "does not decode as hybridsearch.v1.UpsertRequest" in err.value.details()
