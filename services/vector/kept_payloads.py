"""The vector payload cache of an embedded collection (VectorSettings.payload_cache; vector/edge.py keeps one per
collection and starts it anew at every write): a search reads its hits' ids and scores from the shard and their
payloads from here, the shard only for those not kept — by the query itself while the cache is cold, by one
retrieve once it is warm."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import qdrant_edge as qe

# The payload cache reads the hits' payloads in the query itself while more than this share of a search's hits is not
# kept (a cold cache: a second read of the missing ones would cost more than it saves), from the cache below it.
COLD_MISSES = 0.25
MISS_WEIGHT = 0.2  # of the latest search in the running share of hits not kept


class Scored(NamedTuple):
    """A hit of a search whose payload came from the payload cache: the fields of qe.ScoredPoint its callers read."""

    id: str
    score: float
    payload: dict
    vector: list | None = None


@dataclass
class KeptPayloads:
    """A collection's payloads by point (VectorSettings.payload_cache), and the running share of hits it missed."""

    payloads: dict[str, dict] = field(default_factory=dict)
    missed: float = 1.0

    def search(self, shard: qe.EdgeShard, batch: qe.QueryBatchRequest, cold: bool, limit: int,
               with_vectors: bool = False) -> list[list[Scored]]:
        """The batch's hits with their payloads: those kept from the cache; the others read by the query itself while
        the cache is cold, else from the shard in one retrieve (a point deleted between the two reads is left out: it
        is gone); both then kept."""
        results = shard.query_batch(batch)
        wanted = {p.id for points in results for p in points}
        have = {i: self.payloads[i] for i in wanted if i in self.payloads}
        missing = [i for i in wanted if i not in have]
        self.missed = (1 - MISS_WEIGHT) * self.missed + MISS_WEIGHT * len(missing) / max(1, len(wanted))
        if missing:
            if cold:  # the query brought them
                new = set(missing)
                read = {p.id: p.payload for points in results for p in points if p.id in new}
            else:
                read = {r.id: r.payload for r in shard.retrieve(missing, True, False)}
            have |= read
            self._keep(read, limit)
        # the kept payload objects themselves, cold or warm: what is built of one is reused (storage.stores.BuiltHits)
        return [[Scored(p.id, p.score, payload, p.vector if with_vectors else None) for p in points
                 if (payload := have.get(p.id)) is not None] for points in results]

    def _keep(self, read: dict[str, dict], limit: int) -> None:
        if len(self.payloads) + len(read) > limit:
            self.payloads.clear()  # bounded: a collection that has read more starts again
        if len(read) <= limit:
            self.payloads |= read
