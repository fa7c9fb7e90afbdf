"""Writes and drops of one collection in one order, so that no acknowledged write is lost to a drop.

The race. A write goes to both stores at once, and so does a drop. Unordered, a drop could land in the BM25
store after the write and in the vector store before it: the write was acknowledged, the BM25 store lost
it, the vector store kept it. Or a store saw the write's documents as unchanged just before the drop
removed them, and answered "nothing to write".

The order. Within this gateway, a collection's writes share a reader-writer lock and its drop takes it
alone: a drop waits for the writes already running, and the writes that arrive meanwhile wait for the drop
and then create the collection anew in both stores. Across gateways (several replicas), the drop holds the
collection in Redis (storage/holds.py, which DropCollection takes) and counts its drops: the epoch
`hybridsearch:epoch:<hash of the collection>`, incremented when a drop starts (after it holds the collection, before it
touches a store) and again when it ends. A write reads the epoch and the hold in one transaction before it
starts (a drop in progress: it waits for it, within its deadline), and the epoch again once both stores
acknowledged it. The same epoch means no drop started or ended while it ran: it is acknowledged. Another
epoch means a drop overlapped it, and it is written again (writes are idempotent: a store that kept the
documents skips them, one that lost them writes them again) until one attempt runs clear of drops, so an
acknowledged write is whole in both stores, whatever raced it.

The same transaction reads the collection's alias record (gateway/resources/aliases.py): the write goes to every
generation it names (the serving one first), and a record changed by the time the write is done (a re-index
began, a switch) makes it run again like a drop would, to the generations the new record names.

Redis unreachable: the write is ordered by this gateway's lock alone (logged), to the generations of the alias
record this gateway read last; a drop needs Redis anyway (gateway/resources/drop.py), so none runs through a gateway that
cannot reach it.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TypeVar

import grpc
from redis.exceptions import RedisError

from hybridsearch.runtime import metrics
from hybridsearch.storage.gates import CollectionGates
from hybridsearch.storage.holds import hold_key
from hybridsearch.contract.errors import Refusal
from hybridsearch.gateway.resources.aliases import ALIASES_KEY, written_names

log = logging.getLogger(__name__)

T = TypeVar("T")
EPOCH_PREFIX = "hybridsearch:epoch:"
# A collection being restored from a snapshot (hybridsearch.snapshots): set before a store moves anything in,
# removed once both have; while it stands the collection does not serve and writes of it are refused.
RESTORING_PREFIX = "hybridsearch:restoring:"
DROP_HOLDER = "a drop"  # the holder name DropCollection holds a collection under (gateway/resources/drop.py)
RESTORE_HOLDER = "a restore"  # ... and a restore (snapshots/coordinator.py): writes wait while either holds it
WAITED_FOR = (DROP_HOLDER, RESTORE_HOLDER)
EPOCH_TTL_S = 24 * 3600  # an epoch outlives every write that could have overlapped its drop (deadlines: minutes)
POLL_S = 0.05  # how often a write waiting for another gateway's drop looks again
REDIS_BACKOFF_S = 1.0  # Redis did not answer: writes go by the local order alone this long before asking again
MAX_ATTEMPTS = 20  # a write overlapped by this many drops in a row is refused (UNAVAILABLE: retry is safe)


def epoch_key(collection: str) -> str:
    """Named by a hash of the collection: a drop leaves no key naming it (a sealed collection's name included)."""
    return f"{EPOCH_PREFIX}{hashlib.sha256(collection.encode()).hexdigest()[:32]}"


def restoring_key(collection: str) -> str:
    return f"{RESTORING_PREFIX}{collection}"


@dataclass(frozen=True)
class Seen:
    """What a write saw before it started: the collection's drop epoch, whether a drop holds it now, and its
    alias record as stored (None: no alias)."""

    epoch: int
    dropping: bool  # a drop or a restore holds it: wait
    restoring: str = ""  # a restore's mark stands (the snapshot's location): refuse
    alias: bytes | None = None


class WriteOrder:
    """The order of one gateway's writes and drops (`client`: the deployment's Redis, redis.asyncio)."""

    def __init__(self, client) -> None:
        self.redis = client
        self.local = CollectionGates()  # this gateway's writes of a collection together, its drop alone
        self._warned = 0.0
        self._down_until = 0.0  # after Redis failed to answer, not asked again until then (no connect timeout a write)
        self._aliases: dict[str, bytes | None] = {}  # collection -> its alias record as last read (Redis down: used)

    @asynccontextmanager
    async def dropping(self, collection: str) -> AsyncIterator[None]:
        """The drop of `collection` (the caller holds it in Redis): alone among this gateway's writes, and
        counted in the epoch before and after, so that the writes of other gateways see it."""
        async with self.local.dropping(collection):
            key = epoch_key(collection)
            await self.redis.incr(key)
            try:
                yield
            finally:
                # kept far longer than any write runs (a write that began before the drop still sees it moved),
                # then gone: the epochs of dropped collections do not pile up
                await self.redis.pipeline(transaction=True).incr(key).expire(key, EPOCH_TTL_S).execute()

    async def write(self, collection: str, attempt: Callable[[list[str]], Awaitable[T]], deadline: float) -> T:
        """`attempt(stored_names)` (one idempotent write to both stores of each stored name, in order) until one
        runs clear of drops and alias changes; its result. `deadline`: time.monotonic() by which to give up
        waiting for a drop (a Refusal, UNAVAILABLE)."""
        for attempts in range(1, MAX_ATTEMPTS + 1):
            async with self.local.using(collection):
                seen = await self._seen(collection)
                if seen is not None and seen.restoring and not seen.dropping:
                    raise Refusal(f"collection {collection!r} is being restored from {seen.restoring}, or its restore "
                                  "was cut short: writes wait for it (run the restore again to finish it, or drop the "
                                  "collection)", grpc.StatusCode.FAILED_PRECONDITION)
                if seen is None or not seen.dropping:
                    alias = self._aliases.get(collection) if seen is None else seen.alias
                    result = await attempt(written_names(collection, alias))
                    if seen is None or await self._state(collection) == (seen.epoch, seen.alias):
                        return result
                    metrics.WRITE_RACES.inc()
                    log.info("a write of %s overlapped a drop or an alias change: written again (attempt %d)",
                             collection, attempts + 1)
                    continue
            # another gateway drops the collection now: wait until it is done, then write
            if time.monotonic() + POLL_S > deadline:
                break
            await asyncio.sleep(POLL_S)
        raise Refusal(f"collection {collection!r} was being dropped while this write ran: nothing of it is "
                      f"acknowledged; retry, it is safe", grpc.StatusCode.UNAVAILABLE)

    async def _seen(self, collection: str) -> Seen | None:
        """The epoch, the drop hold, the restore mark and the alias record, read together; None when Redis cannot
        be reached."""
        if time.monotonic() < self._down_until:
            return None
        try:
            async with self.redis.pipeline(transaction=True) as pipe:
                epoch, holder, mark, alias = await (pipe.get(epoch_key(collection)).get(hold_key(collection))
                                                    .get(restoring_key(collection)).hget(ALIASES_KEY, collection)
                                                    .execute())
        except (RedisError, OSError) as err:
            self._unordered(collection, err)
            return None
        holder = holder.decode() if isinstance(holder, bytes) else (holder or "")
        mark = mark.decode() if isinstance(mark, bytes) else (mark or "")
        self._aliases[collection] = alias
        return Seen(int(epoch or 0), holder.startswith(WAITED_FOR), mark, alias)

    async def _state(self, collection: str) -> tuple[int, bytes | None] | None:
        """The epoch and the alias record now."""
        try:
            async with self.redis.pipeline(transaction=True) as pipe:
                epoch, alias = await pipe.get(epoch_key(collection)).hget(ALIASES_KEY, collection).execute()
        except (RedisError, OSError) as err:
            self._unordered(collection, err)
            return None
        return int(epoch or 0), alias

    def _unordered(self, collection: str, err: Exception) -> None:
        now = time.monotonic()
        self._down_until = now + REDIS_BACKOFF_S
        if now - self._warned > 60:
            self._warned = now
            log.warning("Redis is not reachable (%s): writes of %s are ordered against this gateway's drops only",
                        err, collection)
