"""Expansion cache in Redis, keyed by query + collection + generator/model + prompt version.

A key names its collection in clear (`hybridsearch:expansion:<collection>:<digest>`), so dropping a collection
finds its entries (collection_pattern; gateway/drop.py). Collection names hold no glob character."""

from __future__ import annotations

import hashlib
import json
import logging

import redis.asyncio as redis
from redis.exceptions import RedisError

from hybridsearch.common import metrics
from hybridsearch.common.telemetry import tracer

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
    def key(collection: str, *parts: str) -> str:
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

    async def get(self, key: str) -> dict | None:
        try:
            raw = await self.client.get(key)
        except (RedisError, OSError) as err:
            metrics.CACHE_LOOKUPS.labels(result="error").inc()
            self._down(err)
            return None
        self._up()
        metrics.CACHE_LOOKUPS.labels(result="hit" if raw else "miss").inc()
        return json.loads(raw) if raw else None

    async def put(self, key: str, value: dict) -> None:
        try:
            with self.tracer.start_as_current_span("expansion.cache_put"):
                await self.client.set(key, json.dumps(value), ex=self.ttl_s)
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
