"""Link expansion's neighbourhood, pure: which documents are neighbours, by which edge weight, and how
they rank (the store test, tests/vector/test_store.py, reads the same payloads from the engines)."""

from __future__ import annotations

from hybridsearch.config.search import GraphSettings
from hybridsearch.vector.neighbours import EdgeWeights, key_owners, neighbour_edges, ranked, strongest

W = EdgeWeights(explicit=1.0, wiki=0.7, ambiguous=0.4)


def chunk(doc_id, links=(), wiki=(), keys=()):
    return {"doc_id": doc_id, "links": list(links), "wiki": list(wiki), "keys": list(keys)}


def test_explicit_links_weigh_more_than_wiki_links_and_ambiguous_ones_least():
    seed = chunk("a", links=["b"], wiki=["c", "glossary"], keys=["a"])
    keyed = [chunk("c", keys=["c"]), chunk("g1", keys=["glossary"]), chunk("g2", keys=["glossary"]),
             chunk("a", keys=["a"])]
    edges = neighbour_edges(["a"], [seed], keyed, [], W)
    assert edges == {"b": 1.0, "c": 0.7, "g1": 0.4, "g2": 0.4}


def test_incoming_links_count_like_outgoing_ones():
    seed = chunk("a", keys=["a", "alpha"])
    incoming = [chunk("x", links=["a"]), chunk("y", wiki=["alpha"]), chunk("z", wiki=["other"])]
    keyed = [chunk("a", keys=["a", "alpha"])]
    assert neighbour_edges(["a"], [seed], keyed, incoming, W) == {"x": 1.0, "y": 0.7}


def test_the_strongest_edge_wins_and_seeds_are_never_neighbours():
    seeds = [chunk("a", links=["b", "s2"], keys=["a"]), chunk("s2", wiki=["b"], keys=["s2"])]
    keyed = [chunk("b", keys=["b"])]
    incoming = [chunk("b", wiki=["a"])]
    assert neighbour_edges(["a", "s2"], seeds, keyed, incoming, W) == {"b": 1.0}


def test_weights_come_from_the_settings():
    assert EdgeWeights.of(GraphSettings()) == EdgeWeights(1.0, 0.7, 0.4)
    s = GraphSettings()
    assert s.explicit_weight > s.wiki_weight > s.ambiguous_weight


def test_key_owners():
    assert key_owners([chunk("a", keys=["k"]), chunk("a", keys=["k"]), chunk("b", keys=["k", "j"])]) == {
        "k": {"a", "b"}, "j": {"b"}}


def test_strongest_cuts_by_weight_then_id():
    assert strongest({"c": 0.4, "b": 1.0, "a": 0.4, "d": 0.7}, 3) == ["b", "d", "a"]


def test_each_neighbour_is_its_best_chunk_scored_by_similarity_times_edge():
    points = [({"doc_id": "wiki-hit", "chunk_id": "w#0"}, 0.9), ({"doc_id": "linked", "chunk_id": "l#2"}, 0.8),
              ({"doc_id": "linked", "chunk_id": "l#0"}, 0.7), ({"doc_id": "stranger", "chunk_id": "s#0"}, 0.99)]
    out = ranked(points, {"wiki-hit": 0.7, "linked": 1.0}, 10)
    assert [(p["chunk_id"], round(s, 3)) for p, s in out] == [("l#2", 0.8), ("w#0", 0.63)]
    assert [p["chunk_id"] for p, _ in ranked(points, {"wiki-hit": 0.7, "linked": 1.0}, 1)] == ["l#2"]
