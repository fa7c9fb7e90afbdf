"""The query vector cache through the real vector service and gateway of a running stack (tests/stacks.py):
a repeated query is not embedded again, and its vector is in the stack's Redis for the other replicas."""

from __future__ import annotations

import time
import uuid

import grpc
import pytest
import redis

from hybridsearch.v1 import common_pb2, ingest_pb2, vector_pb2_grpc
from hybridsearch.vector.query_cache import REDIS_PREFIX

pytestmark = pytest.mark.stack
COLLECTION = "query-cache"
ORIGINAL = common_pb2.QUERY_KIND_ORIGINAL
VARIANT = common_pb2.QUERY_KIND_LEXICAL_VARIANT


@pytest.fixture(scope="module")
def indexed(gateway):
    docs = [ingest_pb2.Document(id=f"qc-{i}", title=f"heron migration {i}",
                                text=f"notes on grey herons wintering along river {i}") for i in range(4)]
    assert gateway.index(COLLECTION, docs).documents_received == 4
    return docs


def leg_search(stack, *texts: str) -> dict[str, float]:
    queries = [common_pb2.LegQuery(text=t, kind=ORIGINAL if i == 0 else VARIANT) for i, t in enumerate(texts)]
    with grpc.insecure_channel(stack.settings.endpoints.addr("vector")) as channel:
        reply = vector_pb2_grpc.VectorServiceStub(channel).Search(
            common_pb2.LegSearchRequest(collection=COLLECTION, queries=queries, limit=3), timeout=10)
    assert [len(rl.hits) for rl in reply.lists][: len(texts)] == [3] * len(texts)
    return dict(reply.timings_ms)


def qvec_keys(stack) -> set[bytes]:
    client = redis.Redis.from_url(stack.settings.redis.cache_at)
    try:
        return set(client.scan_iter(match=f"{REDIS_PREFIX}*", count=1000))
    finally:
        client.close()


def test_a_repeated_query_is_not_embedded_again(stack, indexed):
    fresh = f"where do grey herons winter {uuid.uuid4().hex[:8]}"
    before = qvec_keys(stack)
    first = leg_search(stack, fresh, f"{fresh} river")
    assert first["embed"] > 0 and "embed_cache" in first
    again = leg_search(stack, f"  {fresh.upper()} ", f"{fresh} river")  # the same tokens: the same keys
    assert again["embed"] == 0.0 and "embed_cache" in again
    # Both written for the other vector replicas, in the background (each write within 0.5 s).
    end = time.monotonic() + 5
    while len(written := qvec_keys(stack) - before) < 2 and time.monotonic() < end:
        time.sleep(0.1)
    assert len(written) == 2


def test_the_gateway_reports_the_cached_embedding(gateway, indexed):
    fresh = f"heron wintering grounds {uuid.uuid4().hex[:8]}"
    timings = [{t.stage: t.ms for t in gateway.explain(fresh, collection=COLLECTION, effort="fast").explain.timings}
               for _ in range(2)]
    assert timings[0]["leg.vector.embed"] > 0
    assert timings[1]["leg.vector.embed"] == 0.0 and "leg.vector.embed_cache" in timings[1]
