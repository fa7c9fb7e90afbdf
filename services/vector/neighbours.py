"""The one-hop link neighbourhood of seed documents (link expansion, `graph`): which documents are
neighbours, by how strong an edge, and how they rank for the query. Pure functions: the chunk store
(vector/store.py) reads the payloads they take, the vector service scores the neighbours' chunks.

Every chunk point carries its document's links (text/links.py, read at write): `links` (explicit
target ids: Markdown links and the links metadata field), `wiki` ([[wiki]] keys) and `keys` (the keys a
wiki link reaches the document by: its file name and its title). A neighbour of a seed is a document
the seed links to (explicitly, or by a wiki key the document owns) or one that links to the seed (its
`links` name the seed, or its `wiki` name one of the seed's keys). Its edge weight is the strongest
edge's: explicit either way, then wiki, then a wiki key that several documents own (ambiguous).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

LINKS, WIKI, KEYS = "links", "wiki", "keys"  # the chunk payload's link fields (keyword indexes)
LINK_FIELDS = ["doc_id", LINKS, WIKI, KEYS]


@dataclass(frozen=True)
class EdgeWeights:
    explicit: float = 1.0
    wiki: float = 0.7
    ambiguous: float = 0.4

    @classmethod
    def of(cls, graph_settings) -> "EdgeWeights":
        return cls(graph_settings.explicit_weight, graph_settings.wiki_weight, graph_settings.ambiguous_weight)


def key_owners(payloads: Iterable[Mapping]) -> dict[str, set[str]]:
    """Wiki key -> the documents that own it (from chunks' `keys`)."""
    owners: dict[str, set[str]] = {}
    for p in payloads:
        for key in p.get(KEYS, []):
            owners.setdefault(key, set()).add(p["doc_id"])
    return owners


def neighbour_edges(seeds: Iterable[str], seed_payloads: Iterable[Mapping], keyed: Iterable[Mapping],
                    incoming: Iterable[Mapping], weights: EdgeWeights) -> dict[str, float]:
    """Neighbour document -> its strongest edge's weight; seeds are never their own neighbours.

    `seed_payloads`: the seeds' chunks (links, wiki, keys); `keyed`: chunks owning any wiki key the
    seeds link to or own (doc_id, keys); `incoming`: chunks linking to a seed (doc_id, links, wiki)."""
    seeds = set(seeds)
    seed_payloads = list(seed_payloads)
    owners = key_owners(keyed)
    seed_keys = {k for p in seed_payloads for k in p.get(KEYS, [])}
    best: dict[str, float] = {}

    def add(doc_id: str, weight: float) -> None:
        if doc_id not in seeds and weight > best.get(doc_id, 0.0):
            best[doc_id] = weight

    def wiki_weight(key: str) -> float:
        return weights.wiki if len(owners.get(key, ())) <= 1 else weights.ambiguous

    for p in seed_payloads:
        for target in p.get(LINKS, []):
            add(target, weights.explicit)
        for key in p.get(WIKI, []):
            for doc_id in owners.get(key, ()):
                add(doc_id, wiki_weight(key))
    for p in incoming:
        if seeds.intersection(p.get(LINKS, [])):
            add(p["doc_id"], weights.explicit)
        for key in seed_keys.intersection(p.get(WIKI, [])):
            add(p["doc_id"], wiki_weight(key))
    return best


def strongest(edges: Mapping[str, float], limit: int) -> list[str]:
    """The `limit` neighbours with the strongest edges (then by id, for a stable cut)."""
    return sorted(edges, key=lambda d: (-edges[d], d))[:limit]


def ranked(points: Iterable[tuple[Mapping, float]], edges: Mapping[str, float], limit: int) -> list[tuple[Mapping, float]]:
    """(payload, similarity) of neighbours' chunks, best similarity first -> each neighbour's best chunk
    with similarity x edge weight, best first, at most `limit`."""
    best: dict[str, tuple[Mapping, float]] = {}
    for payload, similarity in points:
        doc_id = payload["doc_id"]
        if doc_id in edges and doc_id not in best:
            best[doc_id] = (payload, similarity * edges[doc_id])
    return sorted(best.values(), key=lambda ps: (-ps[1], ps[0]["doc_id"]))[:limit]
