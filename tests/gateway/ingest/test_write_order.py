"""Writes and drops of one collection in one order (gateway/ingest/write_order.py), against a real redis-server, with
two gateways (two WriteOrders on one Redis) and two stores whose calls the test interleaves by hand: the
interleavings that lost acknowledged writes before (the drop between a write's two store calls) end with
the write whole in both stores or refused, never half."""

from __future__ import annotations

import asyncio
import time

import grpc
import pytest
import redis.asyncio as aioredis

from hybridsearch.storage.holds import Holds
from hybridsearch.contract.errors import Refusal
from hybridsearch.gateway.resources.aliases import Alias, Aliases, Generation
from hybridsearch.gateway.ingest.write_order import DROP_HOLDER, WriteOrder, epoch_key
from stacks import scratch_redis

DOCS = {"a", "b", "c"}


@pytest.fixture
async def redis_client():
    with scratch_redis("order-") as url:
        client = aioredis.Redis.from_url(url)
        yield client
        await client.aclose()


class Stores:
    """Two stores of documents; `between` runs between a write's BM25 and vector calls (a drop there)."""

    def __init__(self) -> None:
        self.bm25: set[str] = set()
        self.vector: set[str] = set()
        self.between = None
        self.attempts = 0

    async def write(self, stored: list[str] | None = None) -> int:
        self.attempts += 1
        self.stored = stored
        self.bm25 |= DOCS
        if self.between is not None:
            step, self.between = self.between, None  # once: the next attempt runs clear
            await step()
        self.vector |= DOCS
        return len(DOCS)

    def drop(self) -> None:
        self.bm25.clear()
        self.vector.clear()


async def drop_from(order: WriteOrder, client, stores: Stores, collection: str = "c") -> None:
    """What gateway/resources/drop.py does around the stores: the hold, then the order."""
    async with Holds(client).hold(collection, DROP_HOLDER), order.dropping(collection):
        stores.drop()


async def test_a_drop_between_a_writes_two_stores_makes_it_written_again_whole(redis_client):
    writer, dropper, stores = WriteOrder(redis_client), WriteOrder(redis_client), Stores()
    stores.between = lambda: drop_from(dropper, redis_client, stores)  # another gateway drops mid-write
    written = await writer.write("c", stores.write, deadline=time.monotonic() + 10)
    assert written == 3
    assert stores.attempts == 2  # the overlapped attempt was not acknowledged: written again
    assert stores.bm25 == stores.vector == DOCS  # whole in both stores
    assert int(await redis_client.get(epoch_key("c"))) == 2  # the drop counted its start and end


async def test_a_write_clear_of_drops_is_written_once(redis_client):
    order, stores = WriteOrder(redis_client), Stores()
    assert await order.write("c", stores.write, deadline=time.monotonic() + 10) == 3
    assert stores.attempts == 1


async def test_a_write_waits_for_another_gateways_drop_then_creates_the_collection(redis_client):
    writer, stores = WriteOrder(redis_client), Stores()
    stores.bm25 |= {"old"}
    stores.vector |= {"old"}
    released = asyncio.Event()

    async def slow_drop():
        async with Holds(redis_client).hold("c", DROP_HOLDER), WriteOrder(redis_client).dropping("c"):
            await released.wait()
            stores.drop()

    dropping = asyncio.create_task(slow_drop())
    await asyncio.sleep(0.2)  # the drop holds the collection
    writing = asyncio.create_task(writer.write("c", stores.write, deadline=time.monotonic() + 10))
    await asyncio.sleep(0.3)
    assert stores.attempts == 0  # waiting for the drop, not writing under it
    released.set()
    await dropping
    assert await writing == 3
    assert stores.bm25 == stores.vector == DOCS  # after the drop: the collection anew, the write in both


async def test_a_write_held_up_by_a_drop_past_its_deadline_is_refused_unavailable(redis_client):
    writer, stores = WriteOrder(redis_client), Stores()
    async with Holds(redis_client).hold("c", DROP_HOLDER):
        with pytest.raises(Refusal) as refused:
            await writer.write("c", stores.write, deadline=time.monotonic() + 0.3)
    assert refused.value.code == grpc.StatusCode.UNAVAILABLE
    assert "retry, it is safe" in str(refused.value) and stores.attempts == 0


async def test_a_reconcile_hold_does_not_hold_up_writes(redis_client):
    order, stores = WriteOrder(redis_client), Stores()
    async with Holds(redis_client).hold("c", "reconcile"):
        assert await order.write("c", stores.write, deadline=time.monotonic() + 5) == 3


async def test_in_one_gateway_a_drop_waits_for_running_writes_and_later_writes_wait_for_it(redis_client):
    order, stores = WriteOrder(redis_client), Stores()
    started, finish = asyncio.Event(), asyncio.Event()

    async def slow_write(stored):
        started.set()
        await finish.wait()
        return await stores.write()

    writing = asyncio.create_task(order.write("c", slow_write, deadline=time.monotonic() + 10))
    await started.wait()
    dropping = asyncio.create_task(drop_from(order, redis_client, stores))
    await asyncio.sleep(0.1)
    assert not dropping.done()  # the write runs: the drop waits
    finish.set()
    assert await writing == 3
    await dropping
    assert stores.bm25 == stores.vector == set()  # acknowledged before the drop: gone with it, from both


async def test_without_redis_writes_go_by_the_local_order(redis_client):
    order, stores = WriteOrder(aioredis.Redis.from_url("unix:///nonexistent/redis.sock")), Stores()
    assert await order.write("c", stores.write, deadline=time.monotonic() + 5) == 3
    assert stores.attempts == 1


async def test_a_write_goes_to_every_generation_its_alias_keeps_and_again_when_the_alias_changed(redis_client):
    order, stores, aliases = WriteOrder(redis_client), Stores(), Aliases(redis_client)
    assert await order.write("c", stores.write, deadline=time.monotonic() + 5) == 3
    assert stores.stored == ["c"]  # no alias: the collection's own name

    async def begin_reindex():  # another gateway names a generation being built while the write runs
        await aliases.update("c", lambda _: Alias(name="c", building=1, generations={0: Generation(number=0),
                                                                                    1: Generation(number=1)}))

    stores.between = begin_reindex
    assert await order.write("c", stores.write, deadline=time.monotonic() + 5) == 3
    assert stores.attempts == 3  # the attempt that began before the record changed was written again ...
    assert stores.stored == ["c", "c.g1"]  # ... to the serving generation first, then the one being built
