"""Holds on a whole collection: a lease in Redis that an operation on all of a collection takes, so that
another one cannot run on it meanwhile. `hybridsearch reconcile` holds each collection while it repairs it
(a drop then would be undone by the repair's copies); DropCollection takes the hold for its own run and is
refused (FAILED_PRECONDITION, gateway/resources/drop.py) while someone else holds it.

A hold is the key `hybridsearch:hold:<collection>`, its value naming the holder ("reconcile (pid 812 on
host-a)"), set only if absent, with a TTL that a task renews while the hold lasts: a holder that dies
leaves a hold that expires within TTL_S, and one left by a holder of the same name whose process is gone
from this host (a `kill -9`: its value names the pid and host) is taken over at once. Only the owner
releases it (compare-and-delete). Redis errors
reach the caller (redis.exceptions.RedisError, OSError): each decides what running without a hold means.
"""

from __future__ import annotations

import asyncio
import os
import re
import secrets
import logging
import socket
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager

from redis.exceptions import RedisError

log = logging.getLogger(__name__)

KEY_PREFIX = "hybridsearch:hold:"
TTL_S = 30.0  # a dead holder's hold expires this long after its last renewal (renewed every third of it)
# Renew or release only while the hold is still ours (it may have expired and been taken by another).
RENEW = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) end return 0"
RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0"
HOLDER_VALUE = re.compile(r"(?P<holder>.*) \(pid (?P<pid>\d+) on (?P<host>[^,]+), [0-9a-f]+\)")


class Held(Exception):
    """The collection is held by someone else: `holder` names them."""

    def __init__(self, collection: str, holder: str) -> None:
        super().__init__(f"collection {collection!r} is held by {holder}")
        self.collection, self.holder = collection, holder


def hold_key(collection: str) -> str:
    return f"{KEY_PREFIX}{collection}"


def left_by_dead(value: str, holder: str) -> bool:
    """Whether a hold's value names a holder called `holder` whose process no longer runs on this host."""
    found = HOLDER_VALUE.fullmatch(value)
    if found is None or found["holder"] != holder or found["host"] != socket.gethostname():
        return False
    try:
        os.kill(int(found["pid"]), 0)
    except ProcessLookupError:
        return True
    except OSError:  # it exists (another user's): alive
        return False
    return False


class Holds:
    """Holds in one Redis (a `redis.asyncio` client; the deployment's state Redis, redis.state_url)."""

    def __init__(self, client, ttl_s: float = TTL_S) -> None:
        self.client, self.ttl_ms = client, int(ttl_s * 1000)

    @asynccontextmanager
    async def hold(self, collection: str, holder: str) -> AsyncIterator[None]:
        """Holds `collection` for the block; Held when another holder has it."""
        key = hold_key(collection)
        value = f"{holder} (pid {os.getpid()} on {socket.gethostname()}, {secrets.token_hex(4)})"
        if not await self.client.set(key, value, nx=True, px=self.ttl_ms):
            current = await self.client.get(key)
            current = current.decode() if isinstance(current, bytes) else str(current or "another holder")
            # a hold our own kind left behind when it was killed: released (only if still that one) and taken
            if not (left_by_dead(current, holder) and await self.client.eval(RELEASE, 1, key, current)
                    and await self.client.set(key, value, nx=True, px=self.ttl_ms)):
                raise Held(collection, current)
        renewing = asyncio.create_task(self._renew(key, value))
        try:
            yield
        finally:
            renewing.cancel()
            await asyncio.gather(renewing, return_exceptions=True)
            try:
                await self.client.eval(RELEASE, 1, key, value)
            except (RedisError, OSError) as err:  # the hold expires on its own within the TTL
                log.warning("could not release the hold on %s (%s): it expires within %ds", collection, err,
                            self.ttl_ms // 1000)

    @asynccontextmanager
    async def hold_if_reachable(self, collection: str, holder: str, task: str) -> AsyncIterator[bool]:
        """`hold`, or, when Redis cannot be reached, the task runs unheld (logged, `task` naming it); yields
        whether it holds. Held (someone else holds the collection) still reaches the caller."""
        async with AsyncExitStack() as stack:
            try:
                await stack.enter_async_context(self.hold(collection, holder))
                held = True
            except (RedisError, OSError) as err:
                log.warning("%s of %s runs unheld: Redis is not reachable (%s)", task, collection, err)
                held = False
            yield held

    async def holder(self, collection: str) -> str | None:
        """Who holds the collection now (None: nobody)."""
        current = await self.client.get(hold_key(collection))
        return current.decode() if isinstance(current, bytes) else current

    async def _renew(self, key: str, value: str) -> None:
        while True:
            await asyncio.sleep(self.ttl_ms / 3000)
            await self.client.eval(RENEW, 1, key, value, self.ttl_ms)
