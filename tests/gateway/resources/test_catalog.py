"""Which collections exist (gateway/resources/catalog.py): a collection a restore is moving in is missing on every look,
however often it is asked for, and an alias exists as its serving generation. Real Redis; stores stood in by
objects answering ListCollections as the store services do."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import redis.asyncio as aioredis

from hybridsearch.config.settings import Settings
from hybridsearch.gateway.resources.aliases import Alias, Aliases, Generation
from hybridsearch.gateway.resources.catalog import Catalog
from hybridsearch.gateway.ingest.write_order import restoring_key
from hybridsearch.v1 import stores_pb2
from stacks import scratch_redis


class Store:
    """A store service's ListCollections over the names it holds."""

    def __init__(self, names: set[str]) -> None:
        self.names = names

    async def ListCollections(self, request, timeout=None):
        wanted = set(request.names) or self.names
        return stores_pb2.StoreCollectionsResponse(
            collections=[stores_pb2.StoreCollection(name=n) for n in sorted(self.names & wanted)])


def catalog(client, held: set[str]) -> Catalog:
    backends = SimpleNamespace(bm25=Store(held), vector=Store(held))
    return Catalog(Settings(), backends, client)


def test_a_collection_being_restored_is_missing_on_every_look_until_its_mark_goes():
    async def run(url: str) -> list[list[str]]:
        client = aioredis.Redis.from_url(url)
        seen = catalog(client, {"notes"})  # one store moved its part in already; the mark stands
        await client.set(restoring_key("notes"), "repo/snapshots/notes/1.json")
        looks = [await seen.missing(["notes"]) for _ in range(3)]  # within the catalog's 30 s memory
        await client.delete(restoring_key("notes"))
        looks.append(await seen.missing(["notes"]))
        await client.aclose()
        return looks

    with scratch_redis() as url:
        looks = asyncio.run(run(url))
    assert looks == [["notes"], ["notes"], ["notes"], []]


def test_an_alias_exists_as_its_serving_generation():
    async def run(url: str) -> tuple[list[str], list[str]]:
        client = aioredis.Redis.from_url(url)
        await Aliases(client).update("notes", lambda _: Alias(name="notes", serving=1, generations={
            0: Generation(number=0), 1: Generation(number=1)}))
        there = await catalog(client, {"notes.g1"}).missing(["notes", "notes.g1", "notes.g0"])
        gone = await catalog(client, {"notes"}).missing(["notes"])  # generation 1 is not held: missing
        await client.aclose()
        return there, gone

    with scratch_redis() as url:
        there, gone = asyncio.run(run(url))
    assert there == ["notes.g0"] and gone == ["notes"]


class Silent:
    """A black-holed store: ListCollections answers nothing until its deadline."""

    async def ListCollections(self, request, timeout=None):
        await asyncio.sleep(timeout)
        raise asyncio.TimeoutError


def test_one_store_holding_a_collection_answers_without_waiting_for_a_silent_one():
    async def run() -> tuple[list[str], list[str], float]:
        seen = Catalog(Settings(), SimpleNamespace(bm25=Silent(), vector=Store({"notes"})))
        started = asyncio.get_running_loop().time()
        found = await seen.missing(["notes"], timeout=2.0)
        took = asyncio.get_running_loop().time() - started
        unsure = await Catalog(Settings(), SimpleNamespace(bm25=Silent(), vector=Store(set()))).missing(
            ["other"], timeout=0.2)
        return found, unsure, took

    found, unsure, took = asyncio.run(run())
    assert found == [] and took < 1.0  # the vector store holds it: the black-holed BM25 store is not waited for
    assert unsure == []  # held by neither answering store, but the silent one may hold it: not called missing
