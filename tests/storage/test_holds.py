"""Holds on a collection (storage/holds.py) against a real redis-server: one holder at a time, the holder
named, released at the end, renewed while held, and expiring when its holder stops renewing."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys

import pytest
import redis.asyncio as aioredis

from hybridsearch.storage.holds import Held, Holds, hold_key
from stacks import scratch_redis


@pytest.fixture
def url():
    with scratch_redis("hold-") as address:
        yield address


async def test_one_holder_at_a_time_named_and_released(url):
    client = aioredis.Redis.from_url(url)
    holds = Holds(client)
    async with holds.hold("notes", "reconcile"):
        assert (await holds.holder("notes")).startswith("reconcile (pid ")
        with pytest.raises(Held, match=r"collection 'notes' is held by reconcile \(pid"):
            async with holds.hold("notes", "a drop"):
                pass
        async with holds.hold("other", "a drop"):  # another collection is free
            pass
    assert await holds.holder("notes") is None
    async with holds.hold("notes", "a drop"):
        pass
    await client.aclose()


async def test_a_hold_is_renewed_while_held_and_expires_when_its_holder_stops(url):
    client = aioredis.Redis.from_url(url)
    holds = Holds(client, ttl_s=0.3)
    async with holds.hold("notes", "reconcile"):
        await asyncio.sleep(0.9)  # three TTLs: renewed meanwhile
        assert await holds.holder("notes") is not None
    # A holder that dies does not release: the hold goes with its TTL.
    await client.set(hold_key("notes"), "a dead reconcile", px=300)
    with pytest.raises(Held, match="a dead reconcile"):
        async with holds.hold("notes", "a drop"):
            pass
    await asyncio.sleep(0.4)
    async with holds.hold("notes", "a drop"):
        pass
    await client.aclose()


async def test_a_hold_left_by_a_killed_holder_of_the_same_name_is_taken_over_at_once(url):
    """A `kill -9`ed rotate leaves its hold; the same command run again on the host takes it (its pid is gone),
    another kind of holder still waits for the TTL, and a live holder is never taken from."""
    client = aioredis.Redis.from_url(url)
    holds = Holds(client)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    left = f"keys rotate (pid {dead.pid} on {socket.gethostname()}, 0badc0de)"
    await client.set(hold_key("notes"), left, px=30_000)
    with pytest.raises(Held, match="keys rotate"):  # a drop does not take a rotation's hold
        async with holds.hold("notes", "a drop"):
            pass
    async with holds.hold("notes", "keys rotate"):
        assert f"pid {os.getpid()}" in await holds.holder("notes")
    alive = f"keys rotate (pid {os.getpid()} on {socket.gethostname()}, 0badc0de)"
    await client.set(hold_key("notes"), alive, px=30_000)
    with pytest.raises(Held, match="keys rotate"):
        async with holds.hold("notes", "keys rotate"):
            pass
    await client.delete(hold_key("notes"))
    await client.aclose()
