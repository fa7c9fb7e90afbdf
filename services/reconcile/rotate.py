"""`hybridsearch keys rotate`: every record of a sealed collection sealed again with its active key, in both
stores, without embedding anything again (security/sealing.py, docs/security.md "Sealed at rest").

The scan is the cursor: each store lists its documents with the key ids their chunks are sealed with
(StoredDocument.key_ids), and the documents left are exactly those under a key other than the active one.
They go in batches: read back (GetChunks), opened and sealed again (CollectionSeal.reseal: the new sealed
record, metadata, tags and content hash keyed with the new key) and sent back (ResealChunks). The vector
store rewrites the payloads and keeps the vectors (a reseal changes no text: embedding again would cost
the whole ingest); the BM25 store re-indexes them from the clear fields sent (tantivy updates nothing in
place, and indexing costs no model). A document written after it was read is newer, already under the
active key: the store leaves it alone (ResealChunksRequest.expected_hashes). So a rotation killed at any
point (`kill -9`) loses nothing, and the same command run again goes on from what is left.

The collection is held meanwhile (storage/holds.py), so a reconcile or a drop does not run under it; the hold
of a killed rotation is taken over by the next one on the same host (or expires within holds.TTL_S).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field


from hybridsearch.config.settings import Settings
from hybridsearch.security.hashed_terms import HashedTerms, hashes_terms
from hybridsearch.storage.clients import store_stubs
from hybridsearch.storage.holds import Holds
from hybridsearch.security.sealing import CollectionSeal, Sealer
from hybridsearch.runtime.services import Store
from hybridsearch.v1 import common_pb2

BATCH = 50  # documents per GetChunks / ResealChunks
TIMEOUT_S = 600.0
HOLDER = "keys rotate"


# What a run reports after each batch: (store, documents done so far, documents to do in all).
Progress = Callable[[Store, int, int], None]


@dataclass
class Rotation:
    """What a rotation found and did: documents per key id in each store, before and after."""

    collection: str
    active: str
    resealed: dict[Store, int] = field(default_factory=lambda: {s: 0 for s in Store})
    skipped: dict[Store, int] = field(default_factory=lambda: {s: 0 for s in Store})  # written meanwhile
    left: dict[Store, Counter] = field(default_factory=dict)  # per store: documents per old key id, after
    held: bool = True

    @property
    def done(self) -> bool:
        return not any(sum(c.values()) for c in self.left.values())

    def unused(self, key_ids: list[str]) -> list[str]:
        """Of these (old) key ids, those no record of either store uses any more."""
        used = {k for c in self.left.values() for k, n in c.items() if n}
        return [k for k in key_ids if k != self.active and k not in used]


def key_counts(documents: list[common_pb2.StoredDocument]) -> Counter:
    """Documents per key id (a document cut between two keys counts under each; unsealed ones under '')."""
    return Counter(k for d in documents for k in (d.key_ids or [""]))


def describe(active: str, counts: dict[Store, Counter]) -> str:
    """Doctor's line for a sealed collection: its documents per key id in each store, or how far a rotation is."""
    old = {store: sum(n for k, n in c.items() if k != active) for store, c in counts.items()}
    if any(old.values()):
        return "rotation in progress: " + ", ".join(
            f"{store.value} {old[store]} of {sum(c.values())} records under an old key" for store, c in counts.items())
    return "; ".join(f"{store.value}: " + (", ".join(f"{k or 'unsealed'}={n}" for k, n in sorted(c.items())) or "empty")
                     for store, c in counts.items())


class Rotator:
    """Reseals collections against the two store services (their internal gRPC APIs), as reconcile does."""

    def __init__(self, settings: Settings, batch: int = BATCH) -> None:
        self.channels, self.stubs = store_stubs(settings.endpoints)
        self.redis = settings.redis.state(timeout_s=2)
        self.holds = Holds(self.redis)
        self.sealer = Sealer(settings)
        self.terms = HashedTerms(settings.bm25)
        self.batch = batch

    async def listing(self, store: Store, collection: str) -> list[common_pb2.StoredDocument]:
        out: list[common_pb2.StoredDocument] = []
        async for page in self.stubs[store].ListDocuments(common_pb2.ListDocumentsRequest(collection=collection),
                                                          timeout=TIMEOUT_S):
            out += page.documents
        return out

    async def counts(self, collection: str) -> dict[Store, Counter]:
        """Documents per key id in each store (doctor; `keys retire` checks that none uses a key)."""
        return {store: key_counts(await self.listing(store, collection)) for store in Store}

    async def run(self, collection: str, progress: Progress | None = None, max_batches: int = 0) -> Rotation:
        """Reseals every document not under the active key, holding the collection (storage.holds.Held when
        someone else holds it); `max_batches` > 0 stops after that many batches (the rest on the next run)."""
        seal = self.sealer.of(collection)  # SealingError: not sealed, no key, or destroyed
        if seal is None:
            raise ValueError(f"collection {collection!r} is not sealed: it has no records to seal again")
        async with self.holds.hold_if_reachable(collection, HOLDER, "the rotation") as held:
            rotation = Rotation(collection, seal.keys.active, held=held)
            batches = 0
            for store in Store:
                pending = [d.doc_id for d in await self.listing(store, collection)
                           if any(k != seal.keys.active for k in d.key_ids)]
                for start in range(0, len(pending), self.batch):
                    if max_batches and batches >= max_batches:
                        break
                    await self._reseal(store, collection, seal, pending[start:start + self.batch], rotation)
                    batches += 1
                    if progress is not None:
                        progress(store, min(start + self.batch, len(pending)), len(pending))
            rotation.left = {store: Counter({k: n for k, n in counts.items() if k != seal.keys.active})
                             for store, counts in (await self.counts(collection)).items()}
        return rotation

    async def _reseal(self, store: Store, collection: str, seal: CollectionSeal, doc_ids: list[str],
                      rotation: Rotation) -> None:
        stub = self.stubs[store]
        chunks = (await stub.GetChunks(common_pb2.GetChunksRequest(collection=collection, doc_ids=doc_ids),
                                       timeout=TIMEOUT_S)).chunks
        expected = {c.doc_id: c.content_hash for c in chunks}
        resealed = [seal.reseal(c) for c in chunks if c.HasField("sealed")]
        if store is Store.VECTOR:  # payloads only: the clear fields it would index are not sent
            for c in resealed:
                c.title = c.heading = c.text = ""
                c.indexed_metadata.clear()
        elif hashes_terms(seal):  # a hashed-terms index is sent its terms hashed under the new key, never words
            resealed = self.terms.chunks(seal, resealed)
        answer = await stub.ResealChunks(common_pb2.ResealChunksRequest(
            collection=collection, chunks=resealed, expected_hashes=expected), timeout=TIMEOUT_S)
        rotation.resealed[store] += answer.documents_written
        rotation.skipped[store] += answer.documents_unchanged

    async def close(self) -> None:
        for channel in self.channels:
            await channel.close()
        await self.redis.aclose()
