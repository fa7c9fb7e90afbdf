"""DropCollection: a collection out of both stores and out of Redis, under the collection's hold.

The drop takes the collection's hold first (storage/holds.py), so it is refused (FAILED_PRECONDITION) while
`hybridsearch reconcile` repairs the collection, and no reconcile starts while it runs. Then both stores
drop it at once, and the entries Redis keeps for it go: the page orders of searches that read it (a page
token of a dropped collection then says its order is gone) and its expansions. Every step is idempotent,
so a drop that failed half-way (UNAVAILABLE) is simply sent again. Writes and drops of the collection are
ordered (gateway/ingest/write_order.py): a write acknowledged before the drop is gone with it, a write after it
creates the collection anew in both stores, and a write the drop overlapped is written again, whole.

An alias (gateway/resources/aliases.py) is dropped with every generation it has, and its record. One generation goes
alone (`alias drop`, or DropCollection of `notes.g2`), its alias held as for a drop: it leaves the record
first (so the writes after it no longer go to it), then the stores. The serving generation cannot be dropped
that way (switch first, or drop the alias).
"""

from __future__ import annotations

import asyncio

import grpc
from redis.exceptions import RedisError

from hybridsearch.storage.holds import Held, Holds
from hybridsearch.runtime.iterables import batched
from hybridsearch.contract.validation import generation_name, split_generation
from hybridsearch.contract.errors import Refusal
from hybridsearch.gateway.resources.aliases import Alias, Aliases
from hybridsearch.expansion import cache as expansion_cache
from hybridsearch.gateway.query import paging
from hybridsearch.gateway.backends import Backends
from hybridsearch.gateway.ingest.both_stores import store_failure
from hybridsearch.gateway.ingest.write_order import DROP_HOLDER, WriteOrder, restoring_key
from hybridsearch.v1 import collections_pb2, stores_pb2

HOLDER = DROP_HOLDER  # writes of other gateways wait while a holder of this name holds the collection
DROP_TIMEOUT_S = 120.0
SCAN_COUNT = 1000
# Redis keys that belong to a collection, by the glob that finds them.
PATTERNS = (paging.collection_pattern, expansion_cache.collection_pattern)


async def purge(client, collection: str) -> int:
    """Deletes the Redis entries of `collection` (page orders, expansions); how many there were."""
    removed = 0
    for pattern in PATTERNS:
        keys = [key async for key in client.scan_iter(match=pattern(collection), count=SCAN_COUNT)]
        for batch in batched(keys, SCAN_COUNT):
            removed += await client.delete(*batch)
    return removed


class Dropper:
    def __init__(self, backends: Backends, state, cache, order: WriteOrder | None = None,
                 aliases: Aliases | None = None) -> None:
        """`state` and `cache`: clients of the state Redis (holds, epochs, aliases, restore marks) and of the cache
        Redis (the page orders and expansions a drop purges)."""
        self.backends, self.redis, self.cache = backends, state, cache
        self.holds = Holds(state)
        self.order = order or WriteOrder(state)  # the gateway's, shared with its writes
        self.aliases = aliases or Aliases(state)

    async def drop(self, collection: str) -> collections_pb2.DropCollectionResponse:
        """Drops `collection` (checked name: a collection, an alias with its generations, or one generation);
        a Refusal says why not."""
        alias, number = split_generation(collection)
        try:
            async with self.holds.hold(alias, HOLDER), self.order.dropping(alias):
                if number is not None:
                    return await self._drop_generation(alias, number)
                record = await self.aliases.get(alias)
                stored = [record.stored(n) for n in sorted(record.generations)] if record is not None else [alias]
                dropped = [await self._drop(name) for name in stored]
                if record is not None:
                    await self.aliases.update(alias, lambda _: None)
                await self.redis.delete(restoring_key(alias))  # a restore cut short: cleared with what it moved in
                return _summed(alias, dropped)
        except Held as err:
            raise Refusal(f"{err}: it cannot be dropped until that ends; try again then",
                          grpc.StatusCode.FAILED_PRECONDITION) from None
        except (RedisError, OSError) as err:
            raise Refusal(f"Redis (holds, aliases, page orders, expansions) is not reachable ({type(err).__name__}): "
                          f"the drop of {collection!r} did not complete; retry, it is safe") from None

    async def drop_generation(self, alias: str, number: int) -> collections_pb2.DropCollectionResponse:
        """Drops one generation of an alias (generation 0 too: the collection the alias was made from)."""
        try:
            async with self.holds.hold(alias, HOLDER), self.order.dropping(alias):
                return await self._drop_generation(alias, number)
        except Held as err:
            raise Refusal(f"{err}: its generations cannot be dropped until that ends; try again then",
                          grpc.StatusCode.FAILED_PRECONDITION) from None

    async def _drop_generation(self, alias: str, number: int) -> collections_pb2.DropCollectionResponse:
        def leave(record: Alias | None) -> Alias:
            if record is None or number not in record.generations:
                raise Refusal(f"{alias!r} has no generation {number}", grpc.StatusCode.NOT_FOUND)
            if number == record.serving:
                raise Refusal(f"generation {number} serves {alias!r}: switch the alias to another first, or drop "
                              f"{alias!r} with all its generations", grpc.StatusCode.FAILED_PRECONDITION)
            del record.generations[number]
            record.building = None if record.building == number else record.building
            record.previous = None if record.previous == number else record.previous
            return record

        await self.aliases.update(alias, leave)
        return _summed(generation_name(alias, number), [await self._drop(generation_name(alias, number))])

    async def _drop(self, stored: str) -> collections_pb2.DropCollectionResponse:
        """One stored name out of both stores and its Redis entries."""
        request = stores_pb2.DropStoreCollectionRequest(collection=stored)
        results = await asyncio.gather(self.backends.bm25.DropCollection(request, timeout=DROP_TIMEOUT_S),
                                       self.backends.vector.DropCollection(request, timeout=DROP_TIMEOUT_S),
                                       return_exceptions=True)
        if (failure := store_failure(results, "drop")) is not None:
            raise failure
        removed = await purge(self.cache, stored)
        return collections_pb2.DropCollectionResponse(
            collection=stored, existed=any(r.dropped for r in results),
            documents=max(r.documents for r in results), chunks=max(r.chunks for r in results),
            cache_entries=removed)


def _summed(collection: str, dropped: list[collections_pb2.DropCollectionResponse]) -> collections_pb2.DropCollectionResponse:
    """One answer for the stored names a drop removed (an alias: all its generations)."""
    return collections_pb2.DropCollectionResponse(
        collection=collection, existed=any(d.existed for d in dropped), documents=sum(d.documents for d in dropped),
        chunks=sum(d.chunks for d in dropped), cache_entries=sum(d.cache_entries for d in dropped))
