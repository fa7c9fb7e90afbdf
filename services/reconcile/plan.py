"""What reconcile repairs, decided from the two stores' listings alone (pure, unit-tested).

A write is acknowledged only when both stores confirmed it, so drift comes from writes and deletes that
were not acknowledged (the client was told to retry): either outcome is allowed, as long as both stores
end up agreeing. The rules:

  in one store only         copy it to the other (an unacknowledged write completes; an unacknowledged
                            delete that reached one store only is undone: the client never heard it done)
  in both, hashes differ    the newer write wins (written_at_ms, stamped by the gateway); on a tie (a
  (or readers differ)       store that keeps no write time reads 0) the BM25 store's copy wins. Readers count
                            as content: a store still granting what the other denies is drift to repair
  torn in one store         (its chunks disagree: a write cut in half) the other store's copy wins
  torn in both              cannot be repaired from the stores: listed for re-ingest
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from hybridsearch.runtime.services import Store
from hybridsearch.v1 import common_pb2


class Drift(str, enum.Enum):
    MISSING = "missing"      # in one store only
    DIVERGED = "diverged"    # different content in each
    TORN = "torn"            # one store's chunks disagree among themselves


@dataclass(frozen=True)
class Repair:
    doc_id: str
    drift: Drift
    source: Store  # copy from here ...
    target: Store  # ... to here


@dataclass
class Plan:
    repairs: list[Repair]
    unrepairable: list[str]  # torn in both stores: re-ingest
    consistent: int

    def counts(self) -> dict[str, int]:
        out = {d.value: 0 for d in Drift}
        for r in self.repairs:
            out[r.drift.value] += 1
        return {**out, "unrepairable": len(self.unrepairable), "consistent": self.consistent}


def _copy(doc_id: str, drift: Drift, source: Store) -> Repair:
    return Repair(doc_id, drift, source, source.other)


def plan_repairs(bm25: dict[str, common_pb2.StoredDocument], vector: dict[str, common_pb2.StoredDocument]) -> Plan:
    stores = {Store.BM25: bm25, Store.VECTOR: vector}
    repairs, unrepairable, consistent = [], [], 0
    for doc_id in sorted(bm25.keys() | vector.keys()):
        held = {s: docs[doc_id] for s, docs in stores.items() if doc_id in docs}
        if len(held) == 1:
            (source, doc), = held.items()
            if doc.torn:
                unrepairable.append(doc_id)
            else:
                repairs.append(_copy(doc_id, Drift.MISSING, source))
            continue
        a, b = held[Store.BM25], held[Store.VECTOR]
        if a.torn and b.torn:
            unrepairable.append(doc_id)
        elif a.torn or b.torn:
            repairs.append(_copy(doc_id, Drift.TORN, Store.VECTOR if a.torn else Store.BM25))
        elif a.content_hash != b.content_hash or a.readers != b.readers:
            newer = Store.VECTOR if b.written_at_ms > a.written_at_ms else Store.BM25
            repairs.append(_copy(doc_id, Drift.DIVERGED, newer))
        else:
            consistent += 1
    return Plan(repairs, unrepairable, consistent)
