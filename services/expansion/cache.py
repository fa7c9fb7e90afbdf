"""Expansion cache in Redis, keyed by query + collection + generator/model + prompt version.

A key names its collection in clear (`hybridsearch:expansion:<collection>:<digest>`), so dropping a collection
finds its entries (collection_pattern; gateway/resources/drop.py). Collection names hold no glob character.

A sealed collection's entries (security/sealing.py) keep that layout, their digest an HMAC with the collection's
key instead of sha256 (no query can be confirmed from a key), and their values sealed with it (AES-GCM, the
entry's key as associated data): its variants carry the query's words and its documents' feedback terms."""

from __future__ import annotations

import hashlib
import json
import logging

import redis.asyncio as redis
from google.protobuf.message import DecodeError
from redis.exceptions import RedisError

from hybridsearch.runtime import metrics
from hybridsearch.security.sealing import CollectionSeal, SealingError
from hybridsearch.runtime.telemetry import tracer
from hybridsearch.v1 import common_pb2

log = logging.getLogger(__name__)

KEY_PREFIX = "hybridsearch:expansion:"


def collection_pattern(collection: str) -> str:
    """The Redis glob (SCAN MATCH) of every expansion kept for `collection`."""
    return f"{KEY_PREFIX}{collection}:*"


class ExpansionCache:
    def __init__(self, url: str, ttl_s: int) -> None:
        self.url = url
        self.ttl_s = ttl_s
        self.client = redis.Redis.from_url(url, socket_connect_timeout=0.5, socket_timeout=0.5)
        self.available = True
        self._warned = False
        self.tracer = tracer(__name__)
        metrics.initialise(metrics.CACHE_LOOKUPS, "result", metrics.CACHE_RESULTS)

    @staticmethod
    def key(collection: str, *parts: str, seal: CollectionSeal | None = None) -> str:
        """The entry's key under its collection; a sealed collection's digest keyed with its key (HMAC)."""
        if seal is not None:
            digest = seal.digest("expansion", collection, *parts)
        else:
            digest = hashlib.sha256("\x1f".join((collection, *parts)).encode("utf-8")).hexdigest()[:40]
        return f"{KEY_PREFIX}{collection}:{digest}"

    def _down(self, err: Exception) -> None:
        self.available = False
        if not self._warned:
            log.warning("Redis at %s is not reachable (%s): expansion runs uncached", self.url, err)
            self._warned = True

    def _up(self) -> None:
        if not self.available:
            log.info("Redis at %s is reachable again: expansion cache on", self.url)
        self.available, self._warned = True, False

    async def get(self, key: str, seal: CollectionSeal | None = None) -> dict | None:
        try:
            raw = await self.client.get(key)
        except (RedisError, OSError) as err:
            metrics.CACHE_LOOKUPS.labels(result="error").inc()
            self._down(err)
            return None
        self._up()
        if raw and seal is not None:
            try:  # a sealed collection's entry is sealed; one that does not open (another key) is a miss
                raw = seal.open(key, common_pb2.Sealed.FromString(raw))
            except (SealingError, DecodeError):
                raw = None
        metrics.CACHE_LOOKUPS.labels(result="hit" if raw else "miss").inc()
        return json.loads(raw) if raw else None

    async def put(self, key: str, value: dict, seal: CollectionSeal | None = None) -> None:
        """Stores an answer; a sealed collection's sealed with its key (variants carry the collection's words)."""
        data = json.dumps(value).encode()
        if seal is not None:
            data = seal.seal(key, data).SerializeToString()
        try:
            with self.tracer.start_as_current_span("expansion.cache_put"):
                await self.client.set(key, data, ex=self.ttl_s)
        except (RedisError, OSError) as err:
            self._down(err)
            return
        self._up()

    async def ping(self) -> bool:
        try:
            await self.client.ping()
        except (RedisError, OSError) as err:
            self._down(err)
            return False
        self._up()
        return True

    async def close(self) -> None:
        await self.client.aclose()
