"""The tag leg through the gateway, on the real stack: a collection declared with `tag_leg: true` (and
its tags in metadata `topics`, HYBRIDSEARCH_COLLECTIONS in tests/stacks.py) gets a third ranked list."""

from __future__ import annotations

import pytest

from hybridsearch.v1 import common_pb2, ingest_pb2, search_pb2

pytestmark = pytest.mark.stack
OK, SKIPPED = search_pb2.LEG_STATE_OK, search_pb2.LEG_STATE_SKIPPED
DOCS = [
    # Tagged "postgres" but never saying it: only the tag leg can find it by that word.
    ingest_pb2.Document(id="planner", title="Making the query planner pick the index",
                        text="Analyze the table, then check that the planner chooses the index scan over a sequential scan.",
                        metadata={"topics": "Postgres, Indexing"}),
    ingest_pb2.Document(id="vacuum", title="Autovacuum settings",
                        text="Dead tuples pile up when autovacuum runs too rarely on busy tables.",
                        metadata={"topics": "postgres"}),
    ingest_pb2.Document(id="sourdough", title="Sourdough starter",
                        text="Feed the starter flour and water every day and keep it warm.",
                        metadata={"topics": "baking, bread"}),
    ingest_pb2.Document(id="espresso", title="Espresso extraction",
                        text="Grind finer when the shot runs fast; coarser when it chokes the machine.",
                        metadata={"topics": "coffee"}),
]


def legs(response):
    return {leg.name: leg for leg in response.legs}


@pytest.fixture(scope="module")
def tagged(gateway):
    gateway.index("tagged", DOCS)
    gateway.index("untagged", DOCS)


def test_the_tag_leg_adds_an_exact_tag_match_list(gateway, tagged):
    response = gateway.search(search_pb2.SearchRequest(query="postgres indexing", collection="tagged", explain=True,
                                                       effort=common_pb2.EFFORT_FAST))
    assert legs(response)["tag"].state == OK and not response.degraded
    tag_lists = [rl for rl in response.explain.leg_lists if rl.leg == common_pb2.LEG_TAG]
    assert len(tag_lists) == 1
    # Ranked by matched tag count: both tags, then one; untagged documents are not in the list.
    assert [(h.doc_id, h.score) for h in tag_lists[0].hits] == [("planner", 2.0), ("vacuum", 1.0)]
    top = response.hits[0]
    assert top.doc_id == "planner" and common_pb2.LEG_TAG in {l.leg for l in top.legs}
    assert any(t.stage == "leg.tag" for t in response.explain.timings)
    assert response.explain.fusion.HasField("tag_weight")


def test_no_tag_leg_where_the_collection_does_not_declare_it(gateway, tagged):
    response = gateway.search(search_pb2.SearchRequest(query="postgres indexing", collection="untagged", explain=True,
                                                       effort=common_pb2.EFFORT_FAST))
    assert legs(response)["tag"].state == SKIPPED
    assert all(rl.leg != common_pb2.LEG_TAG for rl in response.explain.leg_lists)


def test_the_tag_leg_runs_in_hybrid_mode_only(gateway, tagged):
    response = gateway.search(search_pb2.SearchRequest(query="postgres", collection="tagged",
                                                       mode=common_pb2.RETRIEVAL_MODE_BM25))
    assert legs(response)["tag"].state == SKIPPED


def test_the_tag_leg_applies_the_filters(gateway, tagged):
    only = [common_pb2.MetadataFilter(field="topics", equals="postgres")]
    response = gateway.search(search_pb2.SearchRequest(query="postgres indexing", collection="tagged", explain=True,
                                                       filters=only, effort=common_pb2.EFFORT_FAST))
    tag_lists = [rl for rl in response.explain.leg_lists if rl.leg == common_pb2.LEG_TAG]
    assert [h.doc_id for h in tag_lists[0].hits] == ["vacuum"]
