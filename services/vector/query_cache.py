"""Query vectors that are not computed twice: an in-process LRU, then a level in Redis shared by the
vector replicas, in front of the query encoder (docs/performance.md, "Query vector cache").

A query is normalised first (QueryEncoder.normalise: MiniLM's own tokenizer normalisation, lowercasing
included, then whitespace collapsed; e5 only the whitespace) and the normalised text is what is embedded,
so a vector is a function of its key alone: sha256(encoder identity, normalised text). The identity names
the embedder, its dimension, maximum length, role and normalisation: vectors of another embedder never
answer.

Lookups go memory first, then one MGET for every text of a call the memory did not have (the original
and its variants), then the model for what is still missing. Redis never fails or slows a search: each
call is bounded by `vector.query_cache_timeout_s` (socket timeouts and no retries as well), an error makes
the level skipped for BACKOFF_S after FAILURES_BEFORE_BACKOFF errors in a row, writes go in the
background (a bounded number at once, each within WRITE_TIMEOUT_S). Every outcome is counted (runtime/metrics.py: QUERY_VECTOR_LOOKUPS, QUERY_VECTOR_WRITES).

Concurrent searches for the same new text (one query over several collections, retries) share one
lookup and one model run: the first registers a future per key, the others wait on it; when the first
fails or is cancelled the others compute their own.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import redis.asyncio as redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import RedisError

from hybridsearch.runtime import metrics
from hybridsearch.config.settings import Settings

log = logging.getLogger(__name__)

KEY_VERSION = "qv1"  # part of every key: a change of key or value layout starts afresh
REDIS_PREFIX = "hybridsearch:qvec:"
VALUE_DTYPE = np.dtype("<f4")  # little-endian float32, whatever the machine
# After this many Redis errors in a row (reads or writes), the level is skipped for BACKOFF_S: a Redis
# that is down or black-holed costs a few timeouts per period, not one per query. One late answer alone
# (a stalled event loop on a busy machine trips a 30 ms bound too) does not turn the level off.
FAILURES_BEFORE_BACKOFF = 3
BACKOFF_S = 2.0
# Writes go in the background, so they get longer than lookups (a search never waits for them), and at
# most MAX_PENDING_WRITES are under way at once; past it a write is skipped (counted).
WRITE_TIMEOUT_S = 0.5
MAX_PENDING_WRITES = 64
MAX_CONNECTIONS = 32


class QueryEncoderLike(Protocol):
    """What the cache needs of the encoder (embedder.QueryEncoder)."""

    dim: int
    identity: str

    def normalise(self, text: str) -> str: ...

    async def embed(self, texts: list[str]) -> np.ndarray: ...


def cache_key(identity: str, normalised: str) -> bytes:
    """Both levels' key: sha256 over the key version, the encoder's identity and the normalised text."""
    return hashlib.sha256(f"{KEY_VERSION}\x1f{identity}\x1f{normalised}".encode("utf-8", "surrogatepass")).digest()


class LruVectors:
    """The memory level: at most `size` vectors, the least recently used dropped first (size 0: off).
    The lock makes each call atomic for any thread; the service calls it from its event loop."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._items: OrderedDict[bytes, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: bytes) -> np.ndarray | None:
        with self._lock:
            vector = self._items.get(key)
            if vector is not None:
                self._items.move_to_end(key)
            return vector

    def put(self, key: bytes, vector: np.ndarray) -> None:
        if self.size <= 0:
            return
        with self._lock:
            self._items[key] = vector
            self._items.move_to_end(key)
            while len(self._items) > self.size:
                self._items.popitem(last=False)

    def __len__(self) -> int:
        return len(self._items)


class RedisVectors:
    """The shared level: each vector as little-endian float32 bytes under REDIS_PREFIX + hex key, with a TTL."""

    def __init__(self, url: str, ttl_s: int, timeout_s: float, dim: int) -> None:
        self.url, self.ttl_s, self.timeout_s, self.dim = url, ttl_s, timeout_s, dim
        self.client = _client(url, timeout_s)  # lookups
        self.writer = _client(url, max(timeout_s, WRITE_TIMEOUT_S))  # background writes: a pool of their own
        self._skip_until = 0.0
        self._failures = 0
        self._writes: set[asyncio.Task] = set()
        self._warned = False

    @staticmethod
    def name(key: bytes) -> str:
        return REDIS_PREFIX + key.hex()

    def skipping(self) -> bool:
        return time.monotonic() < self._skip_until

    def _failed(self, err: BaseException) -> None:
        self._failures += 1
        if self._failures < FAILURES_BEFORE_BACKOFF:
            return
        self._skip_until = time.monotonic() + BACKOFF_S
        if not self._warned:
            log.warning("query vector cache: Redis at %s failed %d times in a row (last: %s); embedding without it, "
                        "trying again every %.0f s", self.url, self._failures,
                        type(err).__name__ if isinstance(err, TimeoutError) else err, BACKOFF_S)
            self._warned = True

    def _answered(self) -> None:
        self._failures = 0
        if self._warned:
            log.info("query vector cache: Redis at %s answers again", self.url)
            self._warned = False

    async def get_many(self, keys: list[bytes]) -> list[np.ndarray | None]:
        """One MGET for all `keys`: a vector per key, None where it is missing or Redis did not answer in time."""
        lookups = metrics.QUERY_VECTOR_LOOKUPS
        if self.skipping():
            lookups.labels(level="redis", result="skipped").inc(len(keys))
            return [None] * len(keys)
        try:
            async with asyncio.timeout(self.timeout_s):
                raw = await self.client.mget([self.name(k) for k in keys])
        except (RedisError, OSError, TimeoutError) as err:
            lookups.labels(level="redis", result="error").inc(len(keys))
            self._failed(err)
            return [None] * len(keys)
        self._answered()
        out: list[np.ndarray | None] = []
        for value in raw:
            if value is None:
                lookups.labels(level="redis", result="miss").inc()
                out.append(None)
            elif len(value) != self.dim * VALUE_DTYPE.itemsize:  # another layout under our key: not ours to use
                lookups.labels(level="redis", result="error").inc()
                out.append(None)
            else:
                lookups.labels(level="redis", result="hit").inc()
                out.append(np.frombuffer(value, dtype=VALUE_DTYPE).astype(np.float32))
        return out

    def put_many(self, vectors: dict[bytes, np.ndarray]) -> None:
        """Writes `vectors` in the background: a search never waits for it."""
        if self.skipping() or len(self._writes) >= MAX_PENDING_WRITES:
            metrics.QUERY_VECTOR_WRITES.labels(result="skipped").inc(len(vectors))
            return
        task = asyncio.ensure_future(self._write(vectors))
        self._writes.add(task)
        task.add_done_callback(self._writes.discard)

    async def _write(self, vectors: dict[bytes, np.ndarray]) -> None:
        try:
            async with asyncio.timeout(max(self.timeout_s, WRITE_TIMEOUT_S)):
                async with self.writer.pipeline(transaction=False) as pipe:
                    for key, vector in vectors.items():
                        pipe.set(self.name(key), vector.astype(VALUE_DTYPE).tobytes(), ex=self.ttl_s)
                    await pipe.execute()
        except (RedisError, OSError, TimeoutError) as err:
            metrics.QUERY_VECTOR_WRITES.labels(result="error").inc(len(vectors))
            self._failed(err)
            return
        self._answered()
        metrics.QUERY_VECTOR_WRITES.labels(result="ok").inc(len(vectors))

    async def flush(self) -> None:
        """Waits for the writes under way (each bounded by the timeout)."""
        if self._writes:
            await asyncio.gather(*list(self._writes), return_exceptions=True)

    async def close(self) -> None:
        await self.flush()
        await self.client.aclose()
        await self.writer.aclose()


def _client(url: str, timeout_s: float) -> redis.Redis:
    """A client whose every call ends within `timeout_s` per socket operation, and is never retried."""
    return redis.Redis.from_url(url, socket_connect_timeout=timeout_s, socket_timeout=timeout_s,
                                retry=Retry(NoBackoff(), 0), max_connections=MAX_CONNECTIONS)


@dataclass(frozen=True)
class QueryVectors:
    """A call's vectors (one row per text, in order) and where its time went."""

    vectors: np.ndarray
    model_ms: float  # waiting for the model (or for another search's lookup of the same text); 0: all cached
    cache_ms: float  # normalising, keys, the memory and Redis lookups


class QueryVectorCache:
    """The encoder behind the two levels; either level may be off (size 0, no Redis)."""

    def __init__(self, encoder: QueryEncoderLike, size: int, shared: RedisVectors | None = None) -> None:
        self.encoder, self.dim = encoder, encoder.dim
        self.memory = LruVectors(size)
        self.shared = shared
        self._pending: dict[bytes, asyncio.Future] = {}
        for level, results in metrics.QUERY_VECTOR_RESULTS.items():
            for result in results:
                metrics.QUERY_VECTOR_LOOKUPS.labels(level=level, result=result)
        for result in metrics.QUERY_VECTOR_WRITE_RESULTS:
            metrics.QUERY_VECTOR_WRITES.labels(result=result)

    @classmethod
    def from_settings(cls, settings: Settings, encoder: QueryEncoderLike) -> QueryVectorCache:
        cfg = settings.vector
        url = cfg.query_cache_redis_at(settings.redis.cache_at)
        shared = RedisVectors(url, cfg.query_cache_ttl_s, cfg.query_cache_timeout_s, encoder.dim) if url else None
        log.info("query vector cache: %d vectors in memory; shared level %s", cfg.query_cache_size,
                 f"in Redis at {url} (ttl {cfg.query_cache_ttl_s} s, timeout {cfg.query_cache_timeout_s * 1000:.0f} ms)"
                 if shared else "off")
        return cls(encoder, cfg.query_cache_size, shared)

    @property
    def caching(self) -> bool:
        return self.memory.size > 0 or self.shared is not None

    def key(self, text: str) -> tuple[bytes, str]:
        """(key, normalised text) of a query."""
        normalised = self.encoder.normalise(text)
        return cache_key(self.encoder.identity, normalised), normalised

    async def embed(self, texts: list[str]) -> QueryVectors:
        started = time.perf_counter()
        keys, texts_of = [], {}
        for text in texts:
            key, normalised = self.key(text)
            keys.append(key)
            texts_of.setdefault(key, normalised)
        found: dict[bytes, np.ndarray] = {}
        if self.memory.size > 0:
            for key in texts_of:
                if (vector := self.memory.get(key)) is not None:
                    found[key] = vector
            metrics.QUERY_VECTOR_LOOKUPS.labels(level="memory", result="hit").inc(len(found))
            metrics.QUERY_VECTOR_LOOKUPS.labels(level="memory", result="miss").inc(len(texts_of) - len(found))
        wanted = [key for key in texts_of if key not in found]
        waits = {key: self._pending[key] for key in wanted if key in self._pending}
        own = [key for key in wanted if key not in waits]
        model_ms = 0.0
        if own:
            fetched, model_ms = await self._fetch_shared(own, texts_of)
            found.update(fetched)
        if waits:
            waiting = time.perf_counter()
            for key, future in waits.items():
                vector = await asyncio.shield(future)
                if vector is None:  # the search that looked it up failed or was cancelled: look it up here
                    fetched, _ = await self._fetch([key], texts_of)
                    vector = fetched[key]
                found[key] = vector
            model_ms += (time.perf_counter() - waiting) * 1000
        vectors = np.stack([found[key] for key in keys]) if keys else np.zeros((0, self.dim), dtype=np.float32)
        return QueryVectors(vectors, model_ms, (time.perf_counter() - started) * 1000 - model_ms)

    async def _fetch_shared(self, own: list[bytes], texts_of: dict[bytes, str]) -> tuple[dict[bytes, np.ndarray], float]:
        """_fetch with a future per key that concurrent searches for the same texts wait on."""
        loop = asyncio.get_running_loop()
        futures = {key: loop.create_future() for key in own}
        self._pending.update(futures)
        fetched: dict[bytes, np.ndarray] = {}
        try:
            fetched, model_ms = await self._fetch(own, texts_of)
            return fetched, model_ms
        finally:
            for key, future in futures.items():
                future.set_result(fetched.get(key))  # None: the waiters look it up themselves
                if self._pending.get(key) is future:
                    del self._pending[key]

    async def _fetch(self, keys: list[bytes], texts_of: dict[bytes, str]) -> tuple[dict[bytes, np.ndarray], float]:
        """Vectors of `keys` from Redis, else the model (then written to Redis); all kept in memory.
        Returns them and the milliseconds spent waiting for the model."""
        found: dict[bytes, np.ndarray] = {}
        if self.shared is not None:
            for key, vector in zip(keys, await self.shared.get_many(keys)):
                if vector is not None:
                    found[key] = vector
        missing = [key for key in keys if key not in found]
        model_ms = 0.0
        if missing:
            started = time.perf_counter()
            fresh = await self.encoder.embed([texts_of[key] for key in missing])
            model_ms = (time.perf_counter() - started) * 1000
            computed = {key: fresh[i].copy() for i, key in enumerate(missing)}
            if self.shared is not None:
                self.shared.put_many(computed)
            found.update(computed)
        for key, vector in found.items():
            self.memory.put(key, vector)
        return found, model_ms

    async def close(self) -> None:
        if self.shared is not None:
            await self.shared.close()
