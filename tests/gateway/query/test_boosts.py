"""Metadata boosts and demotions (gateway.query.boosts): at fusion, and after rerank capped at 1.0."""

import math

import pytest

from hybridsearch.config.collections import MetadataBoost
from hybridsearch.gateway.query.boosts import FUSION, RERANK, answer_boosts, boost_fused, factors, matching
from hybridsearch.v1 import common_pb2, fusion_pb2, ingest_pb2, search_pb2

DECISION = MetadataBoost(field="type", value="decision", fusion=1.3, rerank=1.25)
DONE = MetadataBoost(field="status", value="done", fusion=0.6, rerank=0.7)
META = {"a#0": {}, "b#0": {"type": "decision"}, "c#0": {"status": "done"}, "d#0": {"type": "decision", "status": "done"}}


def fused(*scores):
    return [fusion_pb2.FusedHit(doc_id=c[0], chunk_id=c, fusion_score=s, normalized_score=s / scores[0])
            for c, s in zip(META, scores)]


def test_matching_needs_the_exact_value_and_leaves_factor_one_out():
    assert matching({"type": "decision"}, [DECISION, DONE], FUSION) == [(DECISION, 1.3)]
    assert matching({"type": "Decision"}, [DECISION], FUSION) == []
    assert matching({"type": "decision"}, [MetadataBoost(field="type", value="decision")], RERANK) == []


def test_fusion_boosts_multiply_reorder_and_renormalise():
    hits, applied = boost_fused(fused(1.0, 0.9, 0.8, 0.7), META.get, [DECISION, DONE], "notes")
    assert [h.doc_id for h in hits] == ["b", "a", "d", "c"]  # 1.17, 1.0, 0.546, 0.48
    assert {a.collection for a in applied} == {"notes"}
    assert hits[0].fusion_score == pytest.approx(1.17) and hits[0].normalized_score == pytest.approx(1.0)
    assert hits[1].normalized_score == pytest.approx(1.0 / 1.17)
    assert sorted((a.doc_id, a.field, round(a.factor, 4)) for a in applied) == [
        ("b", "type", 1.3), ("c", "status", 0.6), ("d", "status", 0.6), ("d", "type", 1.3)]
    assert {a.stage for a in applied} == {FUSION}


def test_no_boosts_or_no_match_changes_nothing():
    hits = fused(1.0, 0.9, 0.8, 0.7)
    before = [(h.doc_id, h.fusion_score, h.normalized_score) for h in hits]
    assert boost_fused(hits, META.get, []) == (hits, [])
    out, applied = boost_fused(hits, lambda c: {}, [DECISION])
    assert applied == [] and [(h.doc_id, h.fusion_score, h.normalized_score) for h in out] == before


def test_rerank_boosts_apply_to_reranked_hits_capped_at_one():
    finals = {0: 0.9, 1: 0.85, 2: 0.8, 3: 0.1}
    chunks = list(META)
    boosts = answer_boosts(finals, [0, 1, 2, 3], {0: 0.9, 1: 0.8, 2: 0.7}, lambda i: ("notes", [DECISION, DONE]),
                           lambda i: META[chunks[i]], lambda i: chunks[i][0])
    assert finals[1] == 1.0  # 0.85 x 1.25 capped
    assert {a.collection for a in boosts.applied} == {"notes"}
    assert finals[2] == pytest.approx(0.56) and finals[3] == 0.1  # not reranked: untouched
    assert boosts.order == [1, 0, 2, 3]
    assert [(a.doc_id, a.stage, round(a.factor, 4)) for a in boosts.applied] == [("b", RERANK, 1.25), ("c", RERANK, 0.7)]
    # what the calibrated scores take: every hit's fusion-stage product, the reranked ones' rerank-stage factors
    assert boosts.fusion == {i: math.prod(factors(META[c], [DECISION, DONE], FUSION)) for i, c in enumerate(chunks)}
    assert boosts.rerank == {i: factors(META[chunks[i]], [DECISION, DONE], RERANK) for i in (0, 1, 2)}


def test_a_collection_without_boosts_is_left_as_it_was():
    finals = {0: 0.9, 1: 0.85}
    boosts = answer_boosts(finals, [1, 0], {0: 0.9, 1: 0.8}, lambda i: ("plain", []), lambda i: {"type": "decision"}, str)
    assert (boosts.order, boosts.applied, boosts.fusion, boosts.rerank) == ([1, 0], [], {}, {})
    assert finals == {0: 0.9, 1: 0.85}


def test_without_rerank_the_order_stays():
    finals = {0: 1.0, 1: 0.5}
    boosts = answer_boosts(finals, [0, 1], {}, lambda i: ("notes", [DECISION]), lambda i: {"type": "decision"}, str)
    assert (boosts.order, boosts.applied, boosts.rerank) == ([0, 1], [], {})


# Through the gateway, on the real stack: collection "boosted" declares the two boosts above
# (HYBRIDSEARCH_COLLECTIONS in tests/stacks.py); "unboosted" holds the same documents with none.
SAME_TEXT = "Rank fusion merges the ranked lists of every retrieval leg into one ordering."
BOOSTED_DOCS = [
    ingest_pb2.Document(id="a-done", title="Rank fusion", text=SAME_TEXT, metadata={"status": "done"}),
    ingest_pb2.Document(id="b-plain", title="Rank fusion", text=SAME_TEXT),
    ingest_pb2.Document(id="c-decision", title="Rank fusion", text=SAME_TEXT, metadata={"type": "decision"}),
    *(ingest_pb2.Document(id=f"other-{i}", title=f"Fusion note {i}", text=f"Fusion of lists, note {i}: weights and ranks.")
      for i in range(4)),
]


@pytest.fixture(scope="module")
def boosted(gateway):
    gateway.index("boosted", BOOSTED_DOCS)
    gateway.index("unboosted", BOOSTED_DOCS)


def _search(gateway, collection, **kwargs):
    return gateway.search(search_pb2.SearchRequest(query="rank fusion merges ranked lists", collection=collection,
                                                   explain=True, **kwargs))


@pytest.mark.stack
def test_boosts_and_demotions_apply_at_fusion(gateway, boosted):
    response = _search(gateway, "boosted", effort=common_pb2.EFFORT_FAST)
    ids = [h.doc_id for h in response.hits]
    assert ids.index("c-decision") < ids.index("b-plain") < ids.index("a-done")
    applied = {(b.collection, b.doc_id, b.field, b.stage, round(b.factor, 4)) for b in response.explain.boosts}
    assert applied == {("boosted", "c-decision", "type", FUSION, 1.3), ("boosted", "a-done", "status", FUSION, 0.6)}


@pytest.mark.stack
def test_boosts_apply_after_rerank_capped_at_one(gateway, boosted):
    response = _search(gateway, "boosted", effort=common_pb2.EFFORT_FAST, rerank=True, top_k=7)
    assert {leg.name: leg.state for leg in response.legs}["rerank"] == search_pb2.LEG_STATE_OK
    applied = {(b.doc_id, b.stage, round(b.factor, 4)) for b in response.explain.boosts}
    assert {("c-decision", RERANK, 1.25), ("a-done", RERANK, 0.7)} <= applied
    assert all(h.score <= 1.0 for h in response.hits)
    assert [h.score for h in response.hits] == sorted((h.score for h in response.hits), reverse=True)
    ids = [h.doc_id for h in response.hits]
    assert ids.index("c-decision") < ids.index("a-done")


@pytest.mark.stack
def test_a_collection_without_boosts_is_unchanged(gateway, boosted):
    response = _search(gateway, "unboosted", effort=common_pb2.EFFORT_FAST)
    assert list(response.explain.boosts) == []
    assert all(not h.metadata for rl in response.explain.leg_lists for h in rl.hits)


@pytest.mark.stack
def test_across_collections_each_boost_names_the_collection_whose_hit_it_moved(gateway, boosted):
    # The same doc ids in both collections: only "boosted" declares boosts, and explain says which twin moved.
    response = gateway.search(search_pb2.SearchRequest(query="rank fusion merges ranked lists", top_k=14,
                                                       collections=["boosted", "unboosted"], explain=True,
                                                       effort=common_pb2.EFFORT_FAST, rerank=True))
    applied = {(b.collection, b.doc_id, b.stage) for b in response.explain.boosts}
    assert {("boosted", "c-decision", FUSION), ("boosted", "a-done", FUSION)} <= applied
    assert {c for c, _, _ in applied} == {"boosted"}
    # The twins' text is one content (gateway.query.fanout keeps it once): the boosted collection's lifted copy.
    assert (response.hits[0].collection, response.hits[0].doc_id) == ("boosted", "c-decision")


# A hit that a boost lifts into the page from below the legs' text depth (gateway.query.texts): it came without
# its text, and the gateway reads it from the store before showing it.
LIFTED_DOCS = [
    *(ingest_pb2.Document(id=f"lantern-{i}", title=f"Lantern {i}", text="Zephyr quokka lantern.") for i in range(3)),
    ingest_pb2.Document(id="lantern-decision", title="Lantern decision", text="Zephyr quokka lantern glowing.",
                        metadata={"type": "decision"}),
    *(ingest_pb2.Document(id=f"lantern-weak-{i}", title=f"Weak {i}", text="Only a lantern here.") for i in range(3)),
]


@pytest.mark.stack
def test_a_hit_lifted_from_below_the_text_depth_is_shown_with_its_text(gateway):
    gateway.index("boosted", LIFTED_DOCS)
    request = dict(query="zephyr quokka lantern", mode=common_pb2.RETRIEVAL_MODE_BM25, effort=common_pb2.EFFORT_FAST,
                   explain=True)
    plain = {leg.chunk_id: leg.rank for rl in gateway.search(search_pb2.SearchRequest(
        collection="boosted", top_k=4, **request)).explain.leg_lists for leg in rl.hits}
    assert plain["lantern-decision#0"] == 4  # ranked last by BM25: below the text depth of a 1-hit page (2)
    response = gateway.search(search_pb2.SearchRequest(collection="boosted", top_k=1, **request))
    (hit,) = response.hits
    assert hit.doc_id == "lantern-decision" and hit.title == "Lantern decision"
    assert "<mark>lantern</mark>" in hit.marked_snippet.lower() and "glowing" in hit.snippet
    assert "texts" in {t.stage for t in response.explain.timings}  # read from the store, not from the leg
