"""Re-indexing behind an alias: a new generation of a collection built beside the serving one, with no downtime.

    1. The collection is held ("a re-index": no drop, snapshot, restore or other re-index meanwhile; searches
       and writes go on). The vector store creates the new generation with its embedder (VectorService
       CreateCollection), then the alias record names it `building` (gateway/resources/aliases.py): from then on every
       write goes to the serving generation first and then to it (gateway/ingest/write_order.py runs a write again
       when the record changed while it ran).
    2. Rounds: each store's listing of the serving generation against the new one (document ids and content
       hashes, ListDocuments); what differs is copied from the serving generation's store to the same store
       of the new one (its stored chunks: the BM25 store indexes them anew, the vector store embeds them
       with the new embedder; a sealed collection's records are opened for the stores to index and stay
       sealed), what the serving one no longer holds is removed. The first round copies everything.
    3. Once a round copies little, the last rounds run while this gateway's writes of the collection wait
       (`write_pause_ms`), until one finds nothing to copy: the generation then holds what the serving one
       holds, document by document in both stores. It is marked built (and serves, when asked).

Why a copy cannot leave a stale document behind: a write reaches the serving generation before the new one.
A round copies what the serving generation holds when it reads it; if a write of that document overtook
the copy, it reached the serving generation first, so the next round sees the new one differ and copies
again. Only a round that finds nothing to copy ends the re-index, and after it every write reaches both.

A re-index cut short (cancelled, the gateway killed) leaves the generation `building`, still written to:
run it again to finish it (documents already copied are skipped: the stores skip unchanged content), or drop
the generation (`alias drop`) to abandon it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator

import grpc

from hybridsearch.runtime.services import STORES
from hybridsearch.config.collections import collection_config
from hybridsearch.config.settings import Settings
from hybridsearch.security.hashed_terms import HashedTerms, hashes_terms
from hybridsearch.storage.holds import Held, Holds
from hybridsearch.runtime.iterables import batched
from hybridsearch.security.sealing import Sealer
from hybridsearch.contract.validation import check_written_collection
from hybridsearch.contract.errors import Refusal
from hybridsearch.gateway.resources.aliases import Alias, Generation
from hybridsearch.gateway.backends import Backends
from hybridsearch.gateway.resources.catalog import Catalog
from hybridsearch.gateway.ingest.write_order import WriteOrder
from hybridsearch.v1 import aliases_pb2, bm25_pb2, common_pb2, stores_pb2, vector_pb2

log = logging.getLogger(__name__)

HOLDER = "a re-index"
DEFAULT_BATCH = 64
MAX_BATCH = 1000
STORE_TIMEOUT_S = 600.0
PAUSE_BELOW = 200  # a round that copied fewer documents than this: the next ones run with the writes held
MAX_ROUNDS = 20  # rounds without the writes held that still copy more than PAUSE_BELOW: refused (retry later)
MAX_HELD_ROUNDS = 5


class Reindexer:
    def __init__(self, settings: Settings, backends: Backends, catalog: Catalog, order: WriteOrder) -> None:
        self.settings, self.backends, self.catalog, self.order = settings, backends, catalog, order
        self.aliases = catalog.aliases
        self.holds = Holds(order.redis)
        self.sealer = Sealer(settings)
        self.terms = HashedTerms(settings.bm25)

    def _stub(self, store: str):
        return self.backends.bm25 if store == "bm25" else self.backends.vector

    def _stubs(self):
        return [self._stub(store) for store in STORES]

    async def run(self, request: aliases_pb2.ReindexRequest) -> AsyncIterator[aliases_pb2.ReindexResponse]:
        collection = check_written_collection(request.collection)
        batch = request.batch_documents or DEFAULT_BATCH
        if not 0 < batch <= MAX_BATCH:
            raise Refusal(f"batch_documents must be 1-{MAX_BATCH}, got {batch}", grpc.StatusCode.INVALID_ARGUMENT)
        if await self.catalog.missing([collection]):
            raise Refusal(f"collection {collection!r} does not exist", grpc.StatusCode.NOT_FOUND)
        self.sealer.of(collection)  # a sealed collection without its key: refused before anything is made
        started = time.monotonic()
        try:
            async with self.holds.hold(collection, HOLDER):
                serving = await self._serving_space(collection)
                # what the request leaves open stays as the serving generation has it
                embedder, language = request.embedder or serving[0], request.language or serving[1]
                alias, number = await self._begin(collection, embedder, language, serving)
                yield aliases_pb2.ReindexResponse(phase=aliases_pb2.REINDEX_PHASE_CREATED, generation=number,
                                                  seconds=time.monotonic() - started)
                async for progress in self._fill(alias, number, batch, started):
                    yield progress
                alias = await self.aliases.update(collection, lambda r: _built(r, number))
                if request.switch_when_built:
                    alias = await self.aliases.update(collection, lambda r: switched(r, number))
                phase = aliases_pb2.REINDEX_PHASE_SWITCHED if request.switch_when_built else aliases_pb2.REINDEX_PHASE_BUILT
                yield aliases_pb2.ReindexResponse(phase=phase, generation=number, seconds=time.monotonic() - started,
                                                  alias=await self.info(alias))
        except Held as err:
            raise Refusal(f"{err}: a re-index cannot run until that ends", grpc.StatusCode.FAILED_PRECONDITION) from None

    async def _serving_space(self, collection: str) -> tuple[str, str]:
        """The serving generation's embedder, and its BM25 language when it is not the declared one ("")."""
        serving = (await self.catalog.stored([collection]))[collection]
        request = common_pb2.StoreStatsRequest(collection=serving)
        vector, bm25 = await asyncio.gather(self.backends.vector.Stats(request, timeout=30),
                                            self.backends.bm25.Stats(request, timeout=30))
        language = bm25.details.get("language", "")
        declared = collection_config(self.settings, collection).language
        return vector.details.get("embedder", self.settings.vector.embedder), "" if language == declared else language

    async def _begin(self, collection: str, embedder: str, language: str,
                     serving: tuple[str, str]) -> tuple[Alias, int]:
        """The generation this re-index fills: one being built with the same embedder and language (a re-index
        cut short), else a new one, created in each store with its embedder and language before any write is
        mirrored into it."""
        record = await self.aliases.get(collection)
        if record is not None and record.building is not None:
            building = record.generations[record.building]
            if (building.embedder, building.language) != (embedder, language):
                given = f"--embedder {building.embedder}" + (f" --language {building.language}" if building.language else "")
                raise Refusal(f"generation {record.building} of {collection!r} is being built with {building.embedder}"
                              f"{', ' + building.language if building.language else ''}: run the re-index with {given} to "
                              f"finish it, or drop it (`hybridsearch alias drop {collection} {record.building}`) first",
                              grpc.StatusCode.FAILED_PRECONDITION)
            return record, record.building
        number = record.next_number() if record is not None else 1
        stored = (record or Alias(name=collection)).stored(number)
        try:
            # a generation of that name left by an alias whose record was lost (a Redis without its data): no
            # record names it, so nothing writes it; it goes, so that the new one starts empty
            await asyncio.gather(*(stub.DropCollection(stores_pb2.DropStoreCollectionRequest(collection=stored),
                                                       timeout=STORE_TIMEOUT_S) for stub in self._stubs()))
            if language:  # before any write could create it with the declared language
                await self.backends.bm25.CreateCollection(
                    bm25_pb2.CreateBm25CollectionRequest(collection=stored, language=language), timeout=STORE_TIMEOUT_S)
            await self.backends.vector.CreateCollection(
                vector_pb2.CreateVectorCollectionRequest(collection=stored, embedder=embedder), timeout=STORE_TIMEOUT_S)
        except grpc.aio.AioRpcError as err:
            raise Refusal(f"the stores cannot make {stored!r} with {embedder}{', ' + language if language else ''}: "
                          f"{err.details()}", err.code()) from None

        def begin(current: Alias | None) -> Alias:
            alias = current or Alias(name=collection, generations={0: Generation(number=0, embedder=serving[0],
                                                                                 language=serving[1],
                                                                                 note="the collection as it was")})
            if alias.building is not None:  # another gateway began one meanwhile (the hold makes this rare)
                raise Refusal(f"generation {alias.building} of {collection!r} is being built meanwhile",
                              grpc.StatusCode.FAILED_PRECONDITION)
            alias.generations[number] = Generation(number=number, embedder=embedder, language=language,
                                                   note=f"re-indexed from generation {alias.serving}")
            alias.building = number
            return alias

        return await self.aliases.update(collection, begin), number

    async def _fill(self, alias: Alias, number: int, batch: int,
                    started: float) -> AsyncIterator[aliases_pb2.ReindexResponse]:
        """Rounds of copies until one finds nothing to copy (the last ones with this gateway's writes held)."""
        target = alias.stored(number)
        for round_number in range(1, MAX_ROUNDS + 1):
            copied = 0
            async for progress in self._round(alias.name, target, batch, round_number, number, started):
                copied = progress.to_copy + progress.removed
                yield progress
            if copied < PAUSE_BELOW:
                break
        else:
            raise Refusal(f"writes kept changing more than {PAUSE_BELOW} documents of {alias.name!r} a round for "
                          f"{MAX_ROUNDS} rounds; run the re-index again (it goes on from where it is)",
                          grpc.StatusCode.UNAVAILABLE)
        async with self.order.local.dropping(alias.name):  # this gateway's writes of it wait (and finish first)
            paused = time.monotonic()
            for held_round in range(1, MAX_HELD_ROUNDS + 1):
                changed = 0
                async for progress in self._round(alias.name, target, batch, round_number + held_round, number, started):
                    changed = progress.to_copy + progress.removed
                    last = progress
                if not changed:
                    last.write_pause_ms = (time.monotonic() - paused) * 1000
                    yield last
                    return
                yield last
        raise Refusal(f"writes through other gateways kept changing {alias.name!r} while this one held its writes; "
                      "run the re-index again", grpc.StatusCode.UNAVAILABLE)

    async def _round(self, collection: str, target: str, batch: int, round_number: int, number: int,
                     started: float) -> AsyncIterator[aliases_pb2.ReindexResponse]:
        """One round: what differs in each store copied, what is gone removed; progress after each batch."""
        serving = (await self.catalog.stored([collection]))[collection]
        differs: dict[str, list[str]] = {}
        gone: dict[str, list[str]] = {}
        documents = 0
        for store in STORES:
            source, made = await asyncio.gather(self._listing(store, serving), self._listing(store, target))
            documents = max(documents, len(source))
            differs[store] = sorted(d for d, h in source.items() if made.get(d) != h)
            gone[store] = sorted(set(made) - set(source))
        progress = aliases_pb2.ReindexResponse(
            phase=aliases_pb2.REINDEX_PHASE_COPYING, generation=number, round=round_number, documents=documents,
            to_copy=len(set(differs["bm25"]) | set(differs["vector"])),
            removed=len(set(gone["bm25"]) | set(gone["vector"])))
        seal = self.sealer.of(collection)
        todo = sorted(set(differs["bm25"]) | set(differs["vector"]))
        for ids in batched(todo, batch):  # both stores at once: one indexes while the other embeds
            wanted = set(ids)
            await asyncio.gather(*(self._copy(store, serving, target, [d for d in differs[store] if d in wanted], seal)
                                   for store in STORES))
            progress.copied += len(ids)
            progress.seconds = time.monotonic() - started
            yield progress
        for store in STORES:
            for ids in batched(gone[store], MAX_BATCH):
                await self._stub(store).DeleteDocuments(common_pb2.DeleteDocumentsRequest(collection=target, doc_ids=ids),
                                                        timeout=STORE_TIMEOUT_S)
        progress.seconds = time.monotonic() - started
        yield progress

    async def _copy(self, store: str, serving: str, target: str, ids: list[str], seal) -> None:
        """These documents' chunks from one store of the serving generation to the same store of the target."""
        if not ids:
            return
        stub = self._stub(store)
        chunks = (await stub.GetChunks(common_pb2.GetChunksRequest(collection=serving, doc_ids=ids),
                                       timeout=STORE_TIMEOUT_S)).chunks
        if seal is not None:  # the store indexes the texts: opened from the sealed records, kept sealed
            chunks = [seal.copyable(c) for c in chunks]
            if store == "bm25" and hashes_terms(seal):
                chunks = self.terms.chunks(seal, chunks)
        await stub.UpsertChunks(common_pb2.UpsertChunksRequest(collection=target, chunks=chunks), timeout=STORE_TIMEOUT_S)

    async def _listing(self, store: str, collection: str) -> dict[str, tuple[str, str]]:
        """Document id -> (its content hash, its readers), as one store holds the collection (a document whose
        readers changed during the re-index is copied again, as one whose text did)."""
        out: dict[str, tuple[str, str]] = {}
        async for page in self._stub(store).ListDocuments(common_pb2.ListDocumentsRequest(collection=collection),
                                                          timeout=STORE_TIMEOUT_S):
            out.update((d.doc_id, (d.content_hash, d.readers)) for d in page.documents)
        return out

    # --- switches -----------------------------------------------------------------------------------------

    async def switch(self, collection: str, number: int | None) -> Alias:
        """`number` serves (None: the previous generation, a rollback), once both stores of it hold as many
        documents as those of the one serving (a write one generation refused leaves them apart: re-index again),
        counted while this gateway's writes of the collection wait (a few milliseconds)."""
        collection = check_written_collection(collection)
        record = await self.aliases.get(collection)
        if record is None:
            raise Refusal(f"{collection!r} is no alias: re-index it first", grpc.StatusCode.NOT_FOUND)
        if number is None:
            if record.previous is None:
                raise Refusal(f"{collection!r} has no previous generation to roll back to",
                              grpc.StatusCode.FAILED_PRECONDITION)
            number = record.previous
        switched(record.model_copy(deep=True), number)  # refused here, before the counts, when it cannot serve
        async with self.order.local.dropping(collection):  # this gateway's writes finish first, then wait: counted at rest
            if number != record.serving:
                await self._same_counts(record, number)
            alias = await self.aliases.update(collection, lambda r: switched(r, number))
        self.catalog.forget(collection)
        return alias

    async def _same_counts(self, record: Alias, number: int) -> None:
        names = (record.serving_name, record.stored(number))
        for store in STORES:
            serving, other = await asyncio.gather(*(self._stub(store).Stats(common_pb2.StoreStatsRequest(collection=n),
                                                                            timeout=30) for n in names))
            if serving.documents != other.documents:
                raise Refusal(f"the {store} store holds {other.documents} documents in generation {number} of "
                              f"{record.name!r} and {serving.documents} in the one serving: run the re-index again "
                              "to bring it in step", grpc.StatusCode.FAILED_PRECONDITION)

    # --- the alias's record as an answer ----------------------------------------------------------------

    async def info(self, alias: Alias) -> aliases_pb2.AliasInfo:
        """The record with each generation's counts (the BM25 store's; 0 when it holds none)."""
        names = [alias.stored(n) for n in sorted(alias.generations)]
        try:
            listed = await self.backends.bm25.ListCollections(stores_pb2.StoreCollectionsRequest(names=names, counts=True),
                                                              timeout=30)
            counts = {c.name: c for c in listed.collections}
        except grpc.aio.AioRpcError:
            counts = {}
        out = aliases_pb2.AliasInfo(collection=alias.name, serving=alias.serving, switched_unix=alias.switched)
        for n in sorted(alias.generations):
            g, held = alias.generations[n], counts.get(alias.stored(n))
            out.generations.add(number=n, stored_name=alias.stored(n), role=ROLES[alias.role(n)], embedder=g.embedder,
                                language=g.language,
                                documents=held.documents if held else 0, chunks=held.chunks if held else 0,
                                created_unix=g.created, built_unix=g.built, note=g.note)
        return out


ROLES = {"serving": aliases_pb2.GENERATION_ROLE_SERVING, "building": aliases_pb2.GENERATION_ROLE_BUILDING,
         "previous": aliases_pb2.GENERATION_ROLE_PREVIOUS, "retired": aliases_pb2.GENERATION_ROLE_RETIRED}


def _built(record: Alias | None, number: int) -> Alias:
    if record is None or record.building != number:
        raise Refusal(f"generation {number} was dropped while it was being built", grpc.StatusCode.ABORTED)
    record.generations[number].built = time.time()
    return record


def switched(record: Alias | None, number: int) -> Alias:
    """The record with `number` serving and the one serving before kept in step as the previous. Refusal for a
    generation that is not in step with the serving one (being built, or retired)."""
    if record is None or number not in record.generations:
        raise Refusal(f"no generation {number}", grpc.StatusCode.NOT_FOUND)
    if number == record.serving:
        return record
    built = record.building == number and record.generations[number].built
    if not (built or number == record.previous):
        why = "is still being built: wait for the re-index to finish" if number == record.building else (
            "is retired (no longer written): it lacks what was written since; re-index again instead")
        raise Refusal(f"generation {number} of {record.name!r} {why}", grpc.StatusCode.FAILED_PRECONDITION)
    record.previous, record.serving = record.serving, number
    record.building = None if record.building == number else record.building
    record.switched = time.time()
    return record
