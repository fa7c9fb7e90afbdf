"""Aliases: a collection name that serves one of its generations, so that a collection can be indexed again
(another embedder) beside the one serving and switched to in one step, and switched back.

A collection becomes an alias the first time it is re-indexed (gateway/resources/reindex.py). Its record, one field of
the Redis hash `hybridsearch:aliases` (every gateway reads the same), says which generation serves, which is
being built and which served before. Generation 0 is the collection the alias was made from (stored under
the alias's own name); generation N >= 1 is stored as `<alias>.g<N>` (contract/validation.py GENERATION_NAME:
no collection name holds a dot). The stores know nothing of aliases: the gateway turns the name a request
gives into stored names, only where it calls a store; everything else (the access check, sealing, caches,
page tokens, the hits' `collection`) keeps the alias's name.

    role      | searches, GetDocuments, Stats | writes and deletes
    serving   | yes                           | yes, first
    building  | no (read it by its name)      | yes (mirrored while the re-index copies the rest)
    previous  | no (read it by its name)      | yes (kept in step: a rollback loses nothing)
    retired   | no                            | no (stale: `alias drop` removes it)

Searches read the record through a cache of READ_TTL_S (a switch reaches every gateway's searches within
it); writes read it fresh in the transaction that orders them against drops (gateway/ingest/write_order.py), and
once more when they are done: a record that changed meanwhile (a re-index began, a switch) makes the write
run again to the generations the new record names, so no write misses a generation being built.
"""

from __future__ import annotations

import enum
import logging
import time
from collections.abc import Callable, Iterable

from pydantic import BaseModel, Field
from redis.exceptions import RedisError, WatchError

from hybridsearch.contract.validation import generation_name, split_generation

log = logging.getLogger(__name__)

ALIASES_KEY = "hybridsearch:aliases"  # a Redis hash: alias name -> Alias (JSON)
READ_TTL_S = 1.0  # how long a search trusts the record it read
MAX_CAS_TRIES = 50


class Role(enum.StrEnum):
    SERVING = "serving"
    BUILDING = "building"
    PREVIOUS = "previous"
    RETIRED = "retired"


class Generation(BaseModel):
    number: int
    embedder: str = ""  # the vector store's embedder ("": the deployment's default, vector.embedder)
    language: str = ""  # the BM25 store's analysis language ("": the collection's declared one)
    created: float = Field(default_factory=time.time)
    built: float = 0.0  # when a re-index found it equal to the serving generation (0: not yet, or generation 0)
    note: str = ""


class Alias(BaseModel):
    name: str
    serving: int = 0
    building: int | None = None
    previous: int | None = None
    generations: dict[int, Generation] = Field(default_factory=dict)
    switched: float = 0.0  # when `serving` last changed

    def stored(self, number: int) -> str:
        return generation_name(self.name, number)

    @property
    def serving_name(self) -> str:
        return self.stored(self.serving)

    @property
    def written(self) -> list[str]:
        """The stored names a write goes to, the serving generation first (gateway/resources/reindex.py relies on it)."""
        numbers = dict.fromkeys(n for n in (self.serving, self.building, self.previous) if n is not None)
        return [self.stored(n) for n in numbers]

    def role(self, number: int) -> Role:
        if number == self.serving:
            return Role.SERVING
        if number == self.building:
            return Role.BUILDING
        if number == self.previous:
            return Role.PREVIOUS
        return Role.RETIRED

    def next_number(self) -> int:
        return max(self.generations, default=0) + 1

    def dump(self) -> str:
        return self.model_dump_json()


def parse(raw: bytes | str | None) -> Alias | None:
    return None if raw is None else Alias.model_validate_json(raw)


def written_names(collection: str, raw: bytes | str | None) -> list[str]:
    """The stored names a write of `collection` goes to, from its alias record as read (None: no alias)."""
    alias = parse(raw)
    return alias.written if alias is not None else [collection]


class AliasChanged(Exception):
    """A record changed under an update too many times in a row."""


class Aliases:
    """The deployment's alias records (`client`: its Redis, redis.asyncio)."""

    def __init__(self, client) -> None:
        self.redis = client
        self._read: dict[str, tuple[float, Alias | None]] = {}  # name -> (when read, record): searches' cache
        self._warned = 0.0

    async def get(self, name: str) -> Alias | None:
        """The record as Redis has it now (RedisError/OSError reach the caller)."""
        alias = parse(await self.redis.hget(ALIASES_KEY, name))
        self._read[name] = (time.monotonic(), alias)
        return alias

    async def all(self) -> dict[str, Alias]:
        raw = await self.redis.hgetall(ALIASES_KEY)
        return {(k.decode() if isinstance(k, bytes) else k): parse(v) for k, v in raw.items()}

    async def stored_names(self, names: Iterable[str]) -> dict[str, str]:
        """The stored name each of `names` is read from (its serving generation, itself when no alias), each record
        trusted READ_TTL_S. Redis unreachable: the records last read (none read: the names themselves)."""
        names = list(dict.fromkeys(names))
        now = time.monotonic()
        stale = [n for n in names if now - self._read.get(n, (-READ_TTL_S, None))[0] >= READ_TTL_S
                 and split_generation(n)[1] is None]
        if stale:
            try:
                raws = await self.redis.hmget(ALIASES_KEY, stale)
            except (RedisError, OSError) as err:
                if now - self._warned > 60:
                    self._warned = now
                    log.warning("aliases: Redis did not answer (%s): searches read the records last seen", err)
            else:
                for name, raw in zip(stale, raws):
                    self._read[name] = (now, parse(raw))
        out = {}
        for name in names:
            base, number = split_generation(name)
            alias = self._read.get(name, (0.0, None))[1]
            if number is not None:  # one generation by its name
                out[name] = generation_name(base, number)
            else:
                out[name] = alias.serving_name if alias is not None else name
        return out

    def forget(self, name: str) -> None:
        self._read.pop(name, None)

    async def update(self, name: str, change: Callable[[Alias | None], Alias | None]) -> Alias | None:
        """`change(record)` applied atomically (WATCH/MULTI: retried when another gateway changed it meanwhile);
        the new record (None: removed). `change` may raise to refuse; it must not have side effects."""
        for _ in range(MAX_CAS_TRIES):
            async with self.redis.pipeline(transaction=True) as pipe:
                try:
                    await pipe.watch(ALIASES_KEY)
                    current = parse(await pipe.hget(ALIASES_KEY, name))
                    new = change(current.model_copy(deep=True) if current is not None else None)
                    pipe.multi()
                    if new is None:
                        pipe.hdel(ALIASES_KEY, name)
                    else:
                        pipe.hset(ALIASES_KEY, name, new.dump())
                    await pipe.execute()
                except WatchError:
                    continue
            self._read[name] = (time.monotonic(), new)
            return new
        raise AliasChanged(f"the alias record of {name!r} kept changing; try again")
