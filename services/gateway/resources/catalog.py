"""Which collections exist, and what each one is: a collection exists once a store holds it (a write
created it). Both stores are asked (StoreCollections); a collection either holds exists.

An alias (gateway/resources/aliases.py) exists when its serving generation does: `stored` gives the name a store holds
for each name a request gives, and `missing` and `listing` go by it (the listing shows aliases, not generations).

Searches ask `missing` before they run: a name the stores do not hold, or one a restore is moving in, is NOT_FOUND (one collection) or a
notice (several; gateway/query/search.py). Names found are remembered for KNOWN_TTL_S, so a collection in use
costs one look-up per that long, not one per search; `forget` ends that at once (a drop). When a store does
not answer the name counts as existing: an outage stays a failed leg, never a NOT_FOUND.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterable
from dataclasses import dataclass

import grpc
from redis.exceptions import RedisError

from hybridsearch.runtime.services import STORES
from hybridsearch.config.collections import DEFAULT, collection_config
from hybridsearch.config.settings import Settings
from hybridsearch.contract.validation import split_generation
from hybridsearch.contract.errors import Refusal
from hybridsearch.gateway.resources.aliases import Aliases
from hybridsearch.gateway.backends import Backends
from hybridsearch.gateway.ingest.write_order import restoring_key
from hybridsearch.v1 import collections_pb2, common_pb2, ingest_pb2, search_pb2, stores_pb2

KNOWN_TTL_S = 30.0
LOOKUP_TIMEOUT_S = 2.0
LIST_TIMEOUT_S = 60.0


def options(settings: Settings, name: str) -> dict[str, str]:
    """The collection's declared settings that differ from the defaults, each as JSON (language apart)."""
    declared = collection_config(settings, name).model_dump(mode="json")
    default = DEFAULT.model_dump(mode="json")
    return {key: json.dumps(value) for key, value in declared.items() if key != "language" and value != default[key]}


@dataclass(frozen=True)
class Located:
    """Where a request's collections are read from: each name's stored name (an alias's serving generation,
    any other name itself), and the names no store holds (empty when not checked)."""

    stored: dict[str, str]
    missing: list[str]


class Catalog:
    def __init__(self, settings: Settings, backends: Backends, redis_client=None) -> None:
        self.settings, self.backends = settings, backends
        self.redis = redis_client  # restores' marks (gateway/ingest/write_order.py): a collection being restored is missing
        self.aliases = Aliases(redis_client) if redis_client is not None else None
        self._known: dict[str, float] = {}  # name -> when a store was last seen holding it (monotonic)

    def _stubs(self):
        return (self.backends.bm25, self.backends.vector)

    async def _ask(self, request: stores_pb2.StoreCollectionsRequest,
                   timeout: float) -> list[stores_pb2.StoreCollectionsResponse | BaseException]:
        return list(await asyncio.gather(*(stub.ListCollections(request, timeout=timeout) for stub in self._stubs()),
                                         return_exceptions=True))

    async def stored(self, names: Iterable[str]) -> dict[str, str]:
        """The stored name each name is read from: an alias's serving generation, any other name itself."""
        if self.aliases is None:
            return {n: n for n in names}
        return await self.aliases.stored_names(names)

    async def located(self, names: Iterable[str], timeout: float = LOOKUP_TIMEOUT_S, *, check: bool = True) -> Located:
        """Where each name is read from (an alias: its serving generation) and, when `check`, the names no store
        holds: one lookup of the aliases for both."""
        stored = await self.stored(names)
        return Located(stored, await self._missing(stored, timeout) if check else [])

    async def missing(self, names: Iterable[str], timeout: float = LOOKUP_TIMEOUT_S) -> list[str]:
        """The names no store holds (an alias: its serving generation), in the order given."""
        return (await self.located(names, timeout)).missing

    async def _missing(self, stored: dict[str, str], timeout: float) -> list[str]:
        now = time.monotonic()
        unknown = [n for n in stored if now - self._known.get(stored[n], -KNOWN_TTL_S) >= KNOWN_TTL_S]
        if not unknown:
            return []
        restoring = await self._restoring(unknown)  # half-made: missing, whatever the stores say
        wanted = {stored[n] for n in unknown if n not in restoring}
        held, failed = await self._held([stored[n] for n in unknown], wanted, timeout)
        being_restored = {stored[n] for n in restoring}  # half-made: never remembered as existing
        for name in held - being_restored:
            self._known[name] = now
        if failed and not wanted <= held:
            # a store that did not answer may hold them: the search says what failed
            return [n for n in unknown if n in restoring]
        return [n for n in unknown if stored[n] not in held or n in restoring]

    async def _held(self, names: list[str], wanted: set[str], timeout: float) -> tuple[set[str], bool]:
        """Which of `names` the stores hold, and whether a store failed to say. A name one store holds exists:
        once every `wanted` name is held the other store is not waited for (a black-holed store would keep the
        search for the whole timeout, breaker or not)."""
        request = stores_pb2.StoreCollectionsRequest(names=names)
        calls = [asyncio.ensure_future(stub.ListCollections(request, timeout=timeout)) for stub in self._stubs()]
        held, failed = set(), False
        for call in asyncio.as_completed(calls):
            try:
                held |= {c.name for c in (await call).collections}
            except Exception:  # noqa: BLE001 - any failure of a store's answer: it may hold them
                failed = True
            if wanted <= held:
                break
        for call in calls:  # a call not waited for ends on its own, within its timeout (a cancelled call would
            # leave the store's server span without its client span: a trace with two roots)
            call.add_done_callback(_retrieved)
        return held, failed

    async def _restoring(self, names: list[str]) -> set[str]:
        """The names a restore is moving in (half-made: they never serve); none when Redis cannot say."""
        if self.redis is None or not names:
            return set()
        try:
            marks = await self.redis.mget([restoring_key(n) for n in names])
        except (RedisError, OSError):
            return set()
        return {n for n, mark in zip(names, marks) if mark is not None}

    def forget(self, name: str) -> None:
        self._known.pop(name, None)
        if self.aliases is not None:
            self.aliases.forget(name)

    async def listing(self, may_read, readers_of=lambda name: None) -> collections_pb2.ListCollectionsResponse:
        """Every collection a store holds that `may_read(name)` allows, counted by each store (only the documents
        `readers_of(name)` may read, when it names readers); an alias as its serving generation (the others are
        `alias show`'s); UNAVAILABLE (grpc.aio.AioRpcError of the first store) when no store answered."""
        names_only = await self._ask(stores_pb2.StoreCollectionsRequest(), LIST_TIMEOUT_S)
        if all(isinstance(a, BaseException) for a in names_only):
            raise names_only[0]
        held = {c.name for a in names_only if not isinstance(a, BaseException) for c in a.collections}
        aliases = await self._aliases()
        generations = {a.stored(n) for a in aliases.values() for n in a.generations}
        public = {n for n in held if n not in generations and split_generation(n)[1] is None}
        public |= {name for name, a in aliases.items() if a.serving_name in held}
        stored = {n: aliases[n].serving_name if n in aliases else n for n in public if may_read(n)}
        out = collections_pb2.ListCollectionsResponse()
        if not stored:
            return out
        counted = await self._ask(stores_pb2.StoreCollectionsRequest(names=sorted(set(stored.values())), counts=True),
                                  LIST_TIMEOUT_S)
        per_store: dict[str, dict[str, stores_pb2.StoreCollection]] = {}
        for store, answer in zip(STORES, counted):
            if isinstance(answer, BaseException):
                reason = answer.details() if isinstance(answer, grpc.aio.AioRpcError) else str(answer)
                out.notices.append(f"the {store} store did not answer ({reason}): its counts are missing")
                continue
            per_store[store] = {c.name: c for c in answer.collections}
        out.notices.extend(await self._count_readable(per_store, {name: readers_of(name) for name in stored}, stored))
        engine = {store: answer.engine for store, answer in zip(STORES, counted) if not isinstance(answer, BaseException)}
        for name in sorted(stored):
            kept = [(store, per_store[store][stored[name]]) for store in STORES if stored[name] in per_store.get(store, {})]
            info = out.collections.add(name=name, language=collection_config(self.settings, name).language,
                                       options=options(self.settings, name))
            if name in aliases:
                info.options["alias_of"] = json.dumps(stored[name])
            if kept:
                info.documents, info.chunks = kept[0][1].documents, kept[0][1].chunks
            info.stores.extend(ingest_pb2.StoreSummary(store=store, engine=engine[store], documents=c.documents,
                                                       chunks=c.chunks) for store, c in kept)
        return out

    async def _count_readable(self, per_store: dict[str, dict[str, stores_pb2.StoreCollection]], readers: dict,
                              stored: dict[str, str]) -> list[str]:
        """Each store's counts of a collection listed for readers replaced by theirs (StoreStatsRequest.readers);
        a notice for each count a store could not give (it shows 0, never the whole collection's)."""
        asks = [(store, stub, name) for store, stub in zip(STORES, self._stubs()) for name in sorted(stored)
                if readers[name] is not None and stored[name] in per_store.get(store, {})]
        answers = await asyncio.gather(*(stub.Stats(common_pb2.StoreStatsRequest(
            collection=stored[name], readers=readers[name]), timeout=LIST_TIMEOUT_S) for _, stub, name in asks),
            return_exceptions=True)
        notices = []
        for (store, _, name), answer in zip(asks, answers):
            counted = per_store[store][stored[name]]
            if isinstance(answer, BaseException):  # no count rather than one of what the readers may not read
                counted.documents = counted.chunks = 0
                notices.append(f"the {store} store did not count {name!r} for you: 0 shown")
                continue
            counted.documents, counted.chunks = answer.documents, answer.chunks
        return notices

    async def _aliases(self) -> dict:
        if self.aliases is None:
            return {}
        try:
            return await self.aliases.all()
        except (RedisError, OSError):
            return {}


def narrowed(request: search_pb2.SearchRequest, searched: list[str],
             missing: list[str]) -> tuple[search_pb2.SearchRequest, list[str]]:
    """A search of several collections without the `missing` ones, and a notice for each; a Refusal
    (NOT_FOUND) naming them when none of the `searched` collections exists."""
    if len(missing) == len(searched):
        named = ", ".join(repr(m) for m in missing)
        raise Refusal(f"collection {named} does not exist" if len(missing) == 1 else
                      f"none of the collections exists: {named}", grpc.StatusCode.NOT_FOUND)
    kept = [name for name in searched if name not in missing]
    out = search_pb2.SearchRequest()
    out.CopyFrom(request)
    del out.collections[:]
    out.collections.extend(kept)
    if out.collection in missing:
        out.collection = ""
    return out, [f"collection {name!r} does not exist: the answer is from {', '.join(kept)}" for name in missing]


def _retrieved(call: asyncio.Future) -> None:
    """Reads a finished call's outcome, so that a failure nobody waited for is not reported as never retrieved."""
    if not call.cancelled():
        call.exception()
