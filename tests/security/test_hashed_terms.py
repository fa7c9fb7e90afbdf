"""Hashed terms (security/hashed_terms.py): the gateway's analysis is the one tantivy indexes a clear collection
with, term for term (English and German), so a hashed-terms index holds the same terms under their keyed
hashes with the same document frequencies and ranks the same documents with the same scores; a query
matches records hashed under any key the collection holds (a rotation under way); typo tolerance is off."""

from __future__ import annotations

import pytest

from hybridsearch.bm25.tantivy_engine import TantivyBm25Engine
from hybridsearch.config.collections import CollectionConfig
from hybridsearch.config.settings import Settings
from hybridsearch.security.hashed_terms import TERM, TERM_HEX, HashedTerms, hashes_terms
from hybridsearch.security.sealing import CollectionSeal
from hybridsearch.security.keys_file import CollectionKey, CollectionKeys
from hybridsearch.v1 import common_pb2

SETTINGS = Settings()
TEXTS = {
    "en": [("The Runner's Guide", "She runs daily; running is what the runners' club loves. The rules aren't strict."),
           ("Ledger of the harbour", "Harbour ledgers recorded every ship, its cargo and the dues it paid in 1820."),
           ("Running costs", "Costs of a run: shoes, fees, and the harbour's running water.")],
    "de": [("Die Häuser am Rhein", "Nach tagelangem Regen wurden die Häuser der Altstadt überflutet."),
           ("Überflutung", "Ein überflutetes Haus braucht Wochen, bis es wieder trocken ist und die Mauern halten."),
           ("Der Läufer", "Er läuft jeden Morgen, und das Laufen macht ihn glücklich.")],
}
QUERIES = {"en": ["running rules", "harbour ledger dues", "what runs?"],
           "de": ["überflutete Häuser", "laufen am Morgen", "Regen in der Altstadt"]}


def seal_of(language: str, *key_ids: str) -> CollectionSeal:
    """A hashed-terms collection's seal with these keys (the first active), each key its id repeated."""
    keys = {k: CollectionKey.from_secret(k, (k * 32).encode()[:32]) for k in key_ids}
    config = CollectionConfig(sealed=True, sealed_terms="hashed", language=language, fields={"summary": 2.0})
    return CollectionSeal("c", CollectionKeys(key_ids[0], keys), config)


def chunks(language: str, seal: CollectionSeal) -> list[common_pb2.Chunk]:
    """The sealed chunks as CollectionSeal.seal_chunk makes them (clear fields to index, the record sealed)."""
    return [seal.seal_chunk(common_pb2.Chunk(
        chunk_id=f"d{i}#0", doc_id=f"d{i}", title=title, heading=f"Teil {i}" if language == "de" else f"Part {i}",
        text=text, metadata={"summary": title}, content_hash=f"h{i}"))
        for i, (title, text) in enumerate(TEXTS[language])]


def engine(root, language: str, hashed: bool) -> TantivyBm25Engine:
    return TantivyBm25Engine(root, SETTINGS.bm25.stemmer, SETTINGS.bm25.stopwords, title_boost=1.5,
                             language_of=lambda _c: language, fields_of=lambda _c: {"summary": 2.0},
                             hashed_of=lambda _c: hashed)


def dictionary(store: TantivyBm25Engine, field: str) -> dict[str, int]:
    """A field's term dictionary as tantivy holds it: term -> document frequency."""
    return dict(store._collection("c").index.searcher().terms_with_prefix(field, ""))


@pytest.mark.parametrize("language", ["en", "de"])
async def test_the_gateway_analyzes_as_tantivy_indexes_and_ranks_the_same(tmp_path, language):
    seal, terms = seal_of(language, "k1"), HashedTerms(SETTINGS.bm25)
    clear, hashed = engine(tmp_path / "clear", language, False), engine(tmp_path / "hashed", language, True)
    sealed = chunks(language, seal)
    await clear.upsert("c", sealed)
    await hashed.upsert("c", terms.chunks(seal, sealed))
    analyzer = terms.analyzer(seal)
    # The gateway's terms before hashing are the terms tantivy indexed for the clear collection, field by field
    gateway_terms = {t for c in sealed for part in (c.title, c.heading, c.text) for t in analyzer.analyze(part)}
    assert set(dictionary(clear, "body")) == gateway_terms
    assert set(dictionary(clear, "title_terms")) == {t for c in sealed for t in analyzer.analyze(c.title)}
    for field in ("body", "title_terms", "field_summary"):
        in_clear = dictionary(clear, field)
        assert in_clear and dictionary(hashed, field) == {seal.digest(TERM, t)[:TERM_HEX]: n for t, n in in_clear.items()}
    # stemmed, stopwords dropped: the point of running the analysis before hashing
    stems = analyzer.analyze("running ledgers" if language == "en" else "Häuser laufen")
    assert len(stems) == 2 and all(s in gateway_terms for s in stems)
    # the same documents, in the same order, with the same BM25 scores
    queries = QUERIES[language]
    clear_lists = await clear.search("c", queries, 10, [])
    hashed_lists = await hashed.search("c", [terms.query(seal, q) for q in queries], 10, [])
    for a, b in zip(clear_lists, hashed_lists, strict=True):
        assert a and [(h.doc_id, round(h.score, 5)) for h in a] == [(h.doc_id, round(h.score, 5)) for h in b]
    # nothing of the words is in the hashed index's dictionaries
    for field in ("body", "title_terms", "field_summary"):
        assert not gateway_terms & set(dictionary(hashed, field))
    await clear.close()
    await hashed.close()


async def test_a_query_matches_records_hashed_under_any_key_the_collection_holds(tmp_path):
    """A rotation under way: records hashed under the old key and the new coexist, the query holds both."""
    old, rotating = seal_of("en", "old1"), seal_of("en", "new2", "old1")
    terms, store = HashedTerms(SETTINGS.bm25), engine(tmp_path, "en", True)
    [_, ledger, costs] = chunks("en", old)  # both say "harbour"
    await store.upsert("c", terms.chunks(old, [ledger]) + terms.chunks(rotating, [costs]))
    query = terms.query(rotating, "harbour")
    assert query.split() == [d[:TERM_HEX] for d in rotating.digests(TERM, "harbour")]
    assert query.split()[0] == rotating.digest(TERM, "harbour")[:TERM_HEX]  # the active key's first
    [hits] = await store.search("c", [query], 10, [])
    assert {h.doc_id for h in hits} == {"d1", "d2"}
    [new_only] = await store.search("c", [terms.query(seal_of("en", "new2"), "harbour")], 10, [])
    assert {h.doc_id for h in new_only} == {"d2"}  # the new key alone misses the record hashed under the old
    await store.close()


async def test_typo_tolerance_matches_nothing_new_on_hashed_terms(tmp_path):
    seal, terms, store = seal_of("en", "k1"), HashedTerms(SETTINGS.bm25), engine(tmp_path, "en", True)
    await store.upsert("c", terms.chunks(seal, chunks("en", seal)))
    [typo] = await store.search("c", [terms.query(seal, "harbuor")], 10, [], fuzzy=True)
    [exact] = await store.search("c", [terms.query(seal, "harbour")], 10, [], fuzzy=True)
    assert typo == [] and {h.doc_id for h in exact} == {"d1", "d2"}
    assert await store.correct("c", "some words") == "some words"
    await store.close()


def test_only_a_hashed_terms_seal_hashes_terms():
    assert hashes_terms(seal_of("en", "k1")) and not hashes_terms(None)
    clear = seal_of("en", "k1")
    clear = CollectionSeal("c", clear.keys, CollectionConfig(sealed=True))
    assert not hashes_terms(clear)
