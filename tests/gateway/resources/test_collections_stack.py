"""Several collections in one query, through the real stack: each collection searched with its own plan,
the lists fused once more, the same content kept once, each hit naming its collection, paging over the
merged order, filters applied in every collection."""

from __future__ import annotations

import grpc
import pytest

from hybridsearch.client import InvalidArgument, document

pytestmark = pytest.mark.stack
NOTES, CODE = "multi-notes", "multi-code"
QUERY = "apple orchard pruning and borrow checker lifetimes"
SHARED = ("Apple orchards need pruning in winter; the borrow checker of Rust checks lifetimes. "
          "A note kept in both collections.")


@pytest.fixture(scope="module")
def corpus(gateway):
    notes = [document(f"orchard-{i}", f"Apple orchard pruning, note {i}: cut the apple tree's water sprouts "
                      f"in late winter, orchard row {i}.", title=f"Orchard {i}", shelf="keep" if i % 2 else "drop")
             for i in range(6)]
    code = [document(f"borrow-{i}", f"Rust borrow checker lifetimes, part {i}: a reference may not outlive its "
                     f"borrow; the checker proves lifetimes, case {i}.", title=f"Borrow {i}",
                     shelf="keep" if i % 2 else "drop")
            for i in range(6)]
    shared = document("shared", SHARED, title="Both", shelf="keep")
    gateway.upsert(NOTES, notes + [shared])
    gateway.upsert(CODE, code + [shared])


def both(gateway, **options):
    return gateway.search(QUERY, collections=[NOTES, CODE], effort="fast", **options)


def test_hits_come_from_both_collections_each_named(gateway, corpus):
    response = both(gateway, top_k=20)
    by_collection = {(h.collection, h.doc_id) for h in response.hits}
    assert {c for c, _ in by_collection} == {NOTES, CODE}
    assert all(d.startswith("orchard") for c, d in by_collection if c == NOTES and d != "shared")
    assert all(d.startswith("borrow") for c, d in by_collection if c == CODE and d != "shared")
    # The document stored in both collections is one hit (same content), not two.
    assert [h.doc_id for h in response.hits].count("shared") == 1
    assert not response.degraded
    legs = {s.name for s in response.legs}
    assert {"bm25@multi-notes", "bm25@multi-code", "vector@multi-notes", "rerank"} <= legs


def test_explain_names_each_lists_collection(gateway, corpus):
    response = both(gateway, top_k=5, explain=True)
    named = {rl.query.rpartition("@")[2] for rl in response.explain.leg_lists}
    assert named == {NOTES, CODE}
    assert any(t.stage == "merge" for t in response.explain.timings)


def test_pages_follow_the_merged_order(gateway, corpus):
    whole = both(gateway, top_k=12)
    first = both(gateway, top_k=4)
    assert first.next_page_token
    second = both(gateway, top_k=4, page_token=first.next_page_token)
    third = both(gateway, top_k=4, page_token=second.next_page_token)
    pages = [(h.collection, h.doc_id) for r in (first, second, third) for h in r.hits]
    assert pages == [(h.collection, h.doc_id) for h in whole.hits]
    # Later pages read each hit's text from its own collection.
    for got, want in zip(second.hits, whole.hits[4:8]):
        assert (got.collection, got.snippet, got.title) == (want.collection, want.snippet, want.title)
        assert got.snippet


def test_a_filter_applies_in_every_collection(gateway, corpus):
    response = both(gateway, top_k=20, filters={"shelf": "keep"})
    assert {h.collection for h in response.hits} == {NOTES, CODE}
    kept = {"shared"} | {f"{p}-{i}" for p in ("orchard", "borrow") for i in (1, 3, 5)}
    assert {h.doc_id for h in response.hits} <= kept


def test_one_collection_in_collections_is_that_collection(gateway, corpus):
    alone = gateway.search(QUERY, collection=NOTES, effort="fast", top_k=5)
    listed = gateway.search(QUERY, collections=[NOTES], effort="fast", top_k=5)
    assert [h.doc_id for h in listed.hits] == [h.doc_id for h in alone.hits]
    assert {s.name for s in listed.legs} == {s.name for s in alone.legs}


@pytest.mark.parametrize("options, message", [
    (dict(collections=[NOTES, NOTES]), "more than once"),
    (dict(collections=[NOTES, CODE], collection="other"), "not one of collections"),
    (dict(collections=[f"c{i}" for i in range(9)]), "the limit is 8"),
    (dict(collections=[NOTES, "Bad Name"]), "is invalid"),
])
def test_bad_collections_are_clear_errors(gateway, options, message):
    with pytest.raises(InvalidArgument, match=message) as err:
        gateway.search(QUERY, **options)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_each_collection_searches_with_its_own_config(gateway):
    # typo-default declares fuzzy (tests/stacks.py); the other collection keeps the default (off).
    gateway.upsert("typo-default", [document("p", "protein folding in living cells"),
                                    document("g", "galaxy formation and dark matter")])
    gateway.upsert("multi-exact", [document("p2", "protein folding measured by cryo-EM")])
    typo = gateway.search("protien foldnig", collections=["multi-exact", "typo-default"], mode="bm25")
    assert [(h.collection, h.doc_id) for h in typo.hits] == [("typo-default", "p")]
    exact = gateway.search("protein folding", collections=["multi-exact", "typo-default"], mode="bm25")
    assert {(h.collection, h.doc_id) for h in exact.hits} == {("typo-default", "p"), ("multi-exact", "p2")}


TWINS = ("twin-a", "twin-b")


@pytest.fixture(scope="module")
def twins(gateway):
    """The same doc ids in two collections, with different texts (so no hit is deduplicated away)."""
    for name, topic in zip(TWINS, ("apple orchard pruning in winter", "rust borrow checker lifetimes")):
        gateway.upsert(name, [document(f"doc-{i}", f"{topic}, note {i} of {name}", title=f"{name} {i}")
                              for i in range(3)])


def test_explain_keys_hits_by_collection_when_doc_ids_repeat(gateway, twins):
    response = gateway.search("apple orchard pruning and rust borrow checker lifetimes", collections=list(TWINS),
                              effort="fast", rerank=True, explain=True, top_k=10)
    order = list(response.explain.fusion_order)
    assert sorted(order) == sorted(f"{c}/doc-{i}" for c in TWINS for i in range(3))  # six, none collapsed
    reranked = {f"{h.collection}/{h.doc_id}": h.rerank_score for h in response.hits if h.reranked}
    assert len(reranked) == 6 and dict(response.explain.rerank_scores) == pytest.approx(reranked)
    single = gateway.search("apple orchard pruning", collection=TWINS[0], effort="fast", explain=True)
    assert sorted(single.explain.fusion_order) == ["doc-0", "doc-1", "doc-2"]  # one collection: plain doc ids
