"""Reconcile's plan: which copy wins for each kind of drift (pure)."""

from __future__ import annotations

import pytest

from hybridsearch.reconcile.plan import Drift, Repair, plan_repairs
from hybridsearch.runtime.services import Store
from hybridsearch.v1 import common_pb2


def doc(doc_id="d", h="h1", at=0, torn=False, chunks=1, readers="r0"):
    return common_pb2.StoredDocument(doc_id=doc_id, content_hash=h, written_at_ms=at, torn=torn, chunks=chunks,
                                     readers=readers)


def only(repairs):
    assert len(repairs) == 1
    return repairs[0]


@pytest.mark.parametrize("bm25,vector,expected", [
    ({"d": doc()}, {}, Repair("d", Drift.MISSING, Store.BM25, Store.VECTOR)),
    ({}, {"d": doc()}, Repair("d", Drift.MISSING, Store.VECTOR, Store.BM25)),
    ({"d": doc(h="old", at=1)}, {"d": doc(h="new", at=2)}, Repair("d", Drift.DIVERGED, Store.VECTOR, Store.BM25)),
    ({"d": doc(h="new", at=2)}, {"d": doc(h="old", at=1)}, Repair("d", Drift.DIVERGED, Store.BM25, Store.VECTOR)),
    ({"d": doc(h="a", at=0)}, {"d": doc(h="b", at=0)}, Repair("d", Drift.DIVERGED, Store.BM25, Store.VECTOR)),  # tie
    # the same text, other readers: a readers change that reached one store only (the newer one wins)
    ({"d": doc(readers="grants", at=1)}, {"d": doc(readers="denies", at=2)},
     Repair("d", Drift.DIVERGED, Store.VECTOR, Store.BM25)),
    ({"d": doc(torn=True)}, {"d": doc()}, Repair("d", Drift.TORN, Store.VECTOR, Store.BM25)),
    ({"d": doc()}, {"d": doc(h="x", at=9, torn=True)}, Repair("d", Drift.TORN, Store.BM25, Store.VECTOR)),
])
def test_which_copy_wins(bm25, vector, expected):
    plan = plan_repairs(bm25, vector)
    assert only(plan.repairs) == expected
    assert plan.consistent == 0 and not plan.unrepairable


def test_agreeing_stores_need_nothing_even_with_different_chunk_counts():
    # The vector leg may keep passages of its own: counts differ, the content hash does not.
    plan = plan_repairs({"d": doc(chunks=3)}, {"d": doc(chunks=7)})
    assert plan.repairs == [] and plan.consistent == 1


@pytest.mark.parametrize("bm25,vector", [
    ({"d": doc(torn=True)}, {"d": doc(torn=True)}),
    ({"d": doc(torn=True)}, {}),
])
def test_torn_everywhere_is_for_reingest(bm25, vector):
    plan = plan_repairs(bm25, vector)
    assert plan.repairs == [] and plan.unrepairable == ["d"]


def test_counts():
    plan = plan_repairs({"a": doc("a"), "b": doc("b", "x", 5), "c": doc("c")}, {"b": doc("b", "y", 1), "c": doc("c")})
    assert plan.counts() == {"missing": 1, "diverged": 1, "torn": 0, "unrepairable": 0, "consistent": 1}
