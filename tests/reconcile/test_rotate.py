"""What `keys rotate` reports (reconcile/rotate.py), from the stores' listings alone (pure); the rotation itself
runs on the real stack in tests/gateway/query/test_sealed_keys.py."""

from __future__ import annotations

from collections import Counter

from hybridsearch.runtime.services import Store
from hybridsearch.reconcile.rotate import Rotation, describe, key_counts
from hybridsearch.v1 import common_pb2


def listing(*key_ids: list[str]) -> list[common_pb2.StoredDocument]:
    return [common_pb2.StoredDocument(doc_id=f"d{i}", key_ids=k) for i, k in enumerate(key_ids)]


def test_documents_are_counted_per_key_and_a_cut_one_under_each():
    assert key_counts(listing(["new"], ["old"], ["old", "new"], [])) == Counter({"new": 2, "old": 2, "": 1})


def test_doctor_says_how_far_a_rotation_is_or_the_records_per_key():
    halfway = {Store.BM25: Counter({"new": 60, "old": 140}), Store.VECTOR: Counter({"old": 200})}
    assert describe("new", halfway) == ("rotation in progress: bm25 140 of 200 records under an old key, "
                                        "vector 200 of 200 records under an old key")
    assert describe("new", {Store.BM25: Counter({"new": 200}), Store.VECTOR: Counter()}) == "bm25: new=200; vector: empty"


def test_an_old_key_is_unused_once_neither_store_holds_a_record_under_it():
    rotation = Rotation("notes", "k3", left={Store.BM25: Counter({"k1": 0}), Store.VECTOR: Counter({"k2": 4})})
    assert rotation.unused(["k3", "k2", "k1"]) == ["k1"] and not rotation.done
    assert Rotation("notes", "k3", left={s: Counter() for s in Store}).done
