"""Runs reconcile against the two store services (their internal gRPC APIs), one collection at a time:
list both stores, plan (reconcile.plan), copy each repaired document's chunks from its source store to
its target in batches, and report what was found and fixed.

Each collection is held while it is reconciled (storage/holds.py: a lease in the deployment's Redis), so the
gateway refuses to drop it meanwhile: a drop in the middle would be undone by the repair's copies. When
Redis cannot be reached the run goes on unheld (a drop cannot run then either: it needs the hold) and its
report says so."""

from __future__ import annotations

from dataclasses import dataclass, field

from redis.exceptions import RedisError

from hybridsearch.config.settings import Settings
from hybridsearch.storage.clients import store_stubs
from hybridsearch.storage.holds import Holds
from hybridsearch.security.hashed_terms import HashedTerms, hashes_terms
from hybridsearch.security.sealing import Sealer
from hybridsearch.gateway.resources.aliases import Aliases
from hybridsearch.reconcile.plan import Plan, plan_repairs
from hybridsearch.runtime.services import Store
from hybridsearch.v1 import common_pb2

COPY_BATCH = 200  # documents per GetChunks / UpsertChunks
TIMEOUT_S = 600.0
HOLDER = "reconcile"


@dataclass
class Report:
    collection: str
    documents: dict[str, int]
    found: dict[str, int]
    repaired: int = 0
    dry_run: bool = False
    reingest: list[str] = field(default_factory=list)  # documents reconcile cannot rebuild: ingest them again
    held: bool = True  # the collection was held for the run (False: Redis could not be reached)

    def row(self) -> dict:
        return {"collection": self.collection, "documents": self.documents, "found": self.found,
                "repaired": self.repaired, "dry_run": self.dry_run, "reingest": self.reingest[:100],
                "reingest_count": len(self.reingest), "held": self.held}


class Reconciler:
    def __init__(self, settings: Settings) -> None:
        self.channels, self.stubs = store_stubs(settings.endpoints)
        # The stores hold the same chunks unless the vector leg keeps passages of its own: then neither
        # store's chunks can rebuild the other's.
        words = settings.vector.chunk_words
        self.same_chunks = not words or words == settings.chunk_words
        self.redis = settings.redis.state(timeout_s=2)
        self.holds = Holds(self.redis)
        self.sealer = Sealer(settings)
        self.terms = HashedTerms(settings.bm25)

    async def listing(self, store: Store, collection: str) -> dict[str, common_pb2.StoredDocument]:
        out: dict[str, common_pb2.StoredDocument] = {}
        async for page in self.stubs[store].ListDocuments(common_pb2.ListDocumentsRequest(collection=collection),
                                                          timeout=TIMEOUT_S):
            out.update((d.doc_id, d) for d in page.documents)
        return out

    async def plan(self, collection: str) -> tuple[Plan, dict[str, int]]:
        bm25, vector = await self.listing(Store.BM25, collection), await self.listing(Store.VECTOR, collection)
        return plan_repairs(bm25, vector), {"bm25": len(bm25), "vector": len(vector)}

    async def run(self, collection: str, dry_run: bool = False) -> Report:
        """Reconciles one collection, holding it meanwhile; storage.holds.Held when someone else holds it. An
        alias (gateway/resources/aliases.py): each generation its writes reach, the serving one's report answered (the
        others' drift in `reingest` is theirs)."""
        async with self.holds.hold_if_reachable(collection, HOLDER, "reconcile") as held:
            stored = await self._stored(collection)
            reports = [await self._run(name, dry_run, collection) for name in stored]
        report = reports[0]
        for other in reports[1:]:
            report.repaired += other.repaired
            report.reingest += [f"{other.collection}/{doc_id}" for doc_id in other.reingest]
        report.held = held
        return report

    async def _stored(self, collection: str) -> list[str]:
        """The stored names of `collection`: an alias's generations kept in step, the serving one first."""
        try:
            alias = await Aliases(self.redis).get(collection)
        except (RedisError, OSError):
            return [collection]
        return alias.written if alias is not None else [collection]

    async def _run(self, collection: str, dry_run: bool, public: str | None = None) -> Report:
        plan, documents = await self.plan(collection)
        report = Report(collection, documents, plan.counts(), dry_run=dry_run, reingest=list(plan.unrepairable))
        repairs = plan.repairs
        if not self.same_chunks:
            report.reingest += [r.doc_id for r in repairs]
            repairs = []
        if dry_run:
            return report
        seal = self.sealer.of(public or collection)  # SealingError: a sealed collection's copies need its key
        for source in Store:
            ids = [r.doc_id for r in repairs if r.source is source]
            for start in range(0, len(ids), COPY_BATCH):
                batch = ids[start:start + COPY_BATCH]
                chunks = (await self.stubs[source].GetChunks(
                    common_pb2.GetChunksRequest(collection=collection, doc_ids=batch), timeout=TIMEOUT_S)).chunks
                if seal is not None:  # the other store indexes the texts: opened from the sealed records
                    chunks = [seal.copyable(c) for c in chunks]
                    if source.other is Store.BM25 and hashes_terms(seal):  # and hashed for a hashed-terms index
                        chunks = self.terms.chunks(seal, chunks)
                await self.stubs[source.other].UpsertChunks(
                    common_pb2.UpsertChunksRequest(collection=collection, chunks=chunks), timeout=TIMEOUT_S)
                report.repaired += len({c.doc_id for c in chunks})
        return report

    async def close(self) -> None:
        for channel in self.channels:
            await channel.close()
        await self.redis.aclose()
