"""Alias records (gateway/resources/aliases.py) in a real Redis: the generations a write goes to, switches and their
refusals, and updates from several gateways at once none of which is lost."""

from __future__ import annotations

import asyncio

import pytest
import redis.asyncio as redis

from hybridsearch.contract.validation import check_collection, check_written_collection, split_generation
from hybridsearch.contract.errors import InvalidArgument, Refusal
from hybridsearch.gateway.resources.aliases import Alias, Aliases, Generation, Role, written_names
from hybridsearch.gateway.resources.reindex import switched
from stacks import scratch_redis


def record(**fields) -> Alias:
    return Alias(name="notes", generations={n: Generation(number=n) for n in (0, 1, 2)}, **fields)


def test_a_write_goes_to_the_serving_generation_first_then_those_kept_in_step():
    assert written_names("notes", None) == ["notes"]
    alias = record(serving=1, building=2, previous=0)
    assert alias.written == ["notes.g1", "notes.g2", "notes"]
    assert written_names("notes", alias.dump()) == ["notes.g1", "notes.g2", "notes"]
    assert [alias.role(n) for n in (0, 1, 2)] == [Role.PREVIOUS, Role.SERVING, Role.BUILDING]


def test_generation_names_are_read_by_their_alias_and_never_written():
    assert check_collection("notes.g2") == "notes.g2" and split_generation("notes.g2") == ("notes", 2)
    assert split_generation("notes") == ("notes", None) and split_generation("notes.g0") == ("notes", 0)
    for bad in ("notes.g01", "notes.x2", "notes.g2.g3", ".g2"):
        with pytest.raises(InvalidArgument):
            check_collection(bad)
    with pytest.raises(InvalidArgument, match="generation 2 of 'notes'"):
        check_written_collection("notes.g2")


def test_a_switch_serves_only_a_generation_in_step_and_keeps_the_old_one_as_previous():
    building = record(serving=0, building=1)
    with pytest.raises(Refusal, match="still being built"):
        switched(building.model_copy(deep=True), 1)
    building.generations[1].built = 1.0
    done = switched(building, 1)
    assert (done.serving, done.previous, done.building) == (1, 0, None) and done.switched > 0
    back = switched(done, 0)  # a rollback: the previous one serves again
    assert (back.serving, back.previous) == (0, 1)
    with pytest.raises(Refusal, match="retired"):
        switched(back, 2)


def test_updates_from_several_gateways_at_once_are_all_applied():
    async def run(url: str) -> Alias:
        clients = [redis.Redis.from_url(url) for _ in range(4)]
        gateways = [Aliases(c) for c in clients]
        await gateways[0].update("notes", lambda _: Alias(name="notes", generations={0: Generation(number=0)}))

        def add(n: int):
            def change(alias: Alias | None) -> Alias:
                alias.generations[n] = Generation(number=n)
                return alias
            return change

        await asyncio.gather(*(gateways[n % 4].update("notes", add(n)) for n in range(1, 41)))
        got = await Aliases(clients[0]).get("notes")
        # the searches' cache answers the last record read; a new record is read after READ_TTL_S
        assert (await gateways[1].stored_names(["notes", "other"])) == {"notes": "notes", "other": "other"}
        for c in clients:
            await c.aclose()
        return got

    with scratch_redis() as url:
        alias = asyncio.run(run(url))
    assert sorted(alias.generations) == list(range(41))
