"""DropCollection: a collection out of both stores and out of Redis, under the collection's hold.

The drop takes the collection's hold first (common/holds.py), so it is refused (FAILED_PRECONDITION) while
`hybridsearch reconcile` repairs the collection, and no reconcile starts while it runs. Then both stores
drop it at once, and the entries Redis keeps for it go: the page orders of searches that read it (a page
token of a dropped collection then says its order is gone) and its expansions. Every step is idempotent,
so a drop that failed half-way (UNAVAILABLE) is simply sent again. Writes and drops of the collection are
ordered (gateway/write_order.py): a write acknowledged before the drop is gone with it, a write after it
creates the collection anew in both stores, and a write the drop overlapped is written again, whole.
"""

from __future__ import annotations

import asyncio

import grpc
from redis.exceptions import RedisError

from hybridsearch.common.holds import Held, Holds
from hybridsearch.common.iterables import batched
from hybridsearch.common.validation import Refusal
from hybridsearch.expansion import cache as expansion_cache
from hybridsearch.gateway import paging
from hybridsearch.gateway.backends import Backends
from hybridsearch.gateway.ingest import store_failure
from hybridsearch.gateway.write_order import DROP_HOLDER, WriteOrder, restoring_key
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
    def __init__(self, backends: Backends, redis_client, order: WriteOrder | None = None) -> None:
        self.backends, self.redis = backends, redis_client
        self.holds = Holds(redis_client)
        self.order = order or WriteOrder(redis_client)  # the gateway's, shared with its writes

    async def drop(self, collection: str) -> collections_pb2.DropCollectionResponse:
        """Drops `collection` (checked name); a Refusal says why not."""
        try:
            async with self.holds.hold(collection, HOLDER), self.order.dropping(collection):
                return await self._drop(collection)
        except Held as err:
            raise Refusal(f"{err}: it cannot be dropped until that ends; try again then",
                          grpc.StatusCode.FAILED_PRECONDITION) from None
        except (RedisError, OSError) as err:
            raise Refusal(f"Redis (holds, page orders, expansions) is not reachable ({type(err).__name__}): "
                          f"the drop of {collection!r} did not complete; retry, it is safe") from None

    async def _drop(self, collection: str) -> collections_pb2.DropCollectionResponse:
        request = stores_pb2.DropStoreCollectionRequest(collection=collection)
        results = await asyncio.gather(self.backends.bm25.DropCollection(request, timeout=DROP_TIMEOUT_S),
                                       self.backends.vector.DropCollection(request, timeout=DROP_TIMEOUT_S),
                                       return_exceptions=True)
        if (failure := store_failure(results, "drop")) is not None:
            raise failure
        removed = await purge(self.redis, collection)
        await self.redis.delete(restoring_key(collection))  # a restore cut short: cleared with what it moved in
        return collections_pb2.DropCollectionResponse(
            collection=collection, existed=any(r.dropped for r in results),
            documents=max(r.documents for r in results), chunks=max(r.chunks for r in results),
            cache_entries=removed)
