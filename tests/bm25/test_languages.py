"""A collection's language on the embedded engines (tantivy, bm25s), on the German collection in
tests/data/german: German analysis finds a document through other inflected forms than it uses, and an
`auto` collection serves German and English documents with their own analysis.

`pytest -s` prints the figures docs/quality.md ("Languages") quotes."""

from __future__ import annotations

import pytest
from german_corpus import german_chunks, german_judgements

from hybridsearch.bm25.embedded import EmbeddedBm25Engine
from hybridsearch.bm25.tantivy_engine import TantivyBm25Engine
from hybridsearch.v1 import common_pb2

ENGINES = {
    "tantivy": lambda root, language: TantivyBm25Engine(root, "porter", "en_plus", language_of=lambda _c: language),
    "bm25s": lambda root, language: EmbeddedBm25Engine(root, 1.2, 0.75, "porter", "en_plus", language_of=lambda _c: language),
}


async def reciprocal_ranks(engine) -> list[float]:
    await engine.upsert("c", german_chunks())
    judged = german_judgements()
    lists = await engine.search("c", [query for query, _ in judged], 10, [])
    out = []
    for (_, relevant), hits in zip(judged, lists):
        ids = [h.doc_id for h in hits]
        out.append(1 / (ids.index(relevant) + 1) if relevant in ids else 0.0)
    return out


@pytest.mark.parametrize("engine", ENGINES)
async def test_german_analysis_beats_english_on_german_queries(engine, tmp_path):
    figures = {}
    for language in ("en", "de", "auto"):
        store = ENGINES[engine](tmp_path / language, language)
        rr = await reciprocal_ranks(store)
        await store.close()
        figures[language] = (sum(rr) / len(rr), sum(r == 1 for r in rr), sum(r > 0 for r in rr))
        print(f"{engine} analysis={language}: MRR@10 {figures[language][0]:.3f}, "
              f"first {figures[language][1]}/{len(rr)}, top-10 {figures[language][2]}/{len(rr)}")
    assert figures["de"][0] > figures["en"][0] + 0.1
    assert figures["auto"] == figures["de"]  # every document is German: auto analyzes it as German


@pytest.mark.parametrize("engine", ENGINES)
async def test_auto_matches_each_document_through_its_own_language(engine, tmp_path):
    store = ENGINES[engine](tmp_path, "auto")
    english = common_pb2.Chunk(chunk_id="en1#0", doc_id="en1", title="Flooding on the Rhine", content_hash="en1",
                               text="After days of rain the river rose and many houses in the old town were flooded.")
    await store.upsert("c", [*german_chunks(), english])
    german_hits, english_hits, stopwords_only = await store.search("c", ["überflutetes Haus", "a flooded house", "und der die"], 10, [])
    await store.close()
    assert german_hits[0].doc_id == "d01"  # Häuser/überflutet through German stems
    assert english_hits[0].doc_id == "en1"  # houses/flooded through English stems
    assert stopwords_only == []  # German stopwords, English stopwords too where a language lists them


@pytest.mark.parametrize("engine", ENGINES)
async def test_german_stopwords_do_not_score(engine, tmp_path):
    store = ENGINES[engine](tmp_path, "de")
    await store.upsert("c", german_chunks())
    plain, framed = await store.search("c", ["Haus", "das Haus und die der"], 10, [])
    await store.close()
    assert [(h.doc_id, h.score) for h in plain] == [(h.doc_id, h.score) for h in framed] and plain
