"""Document readers in the tantivy engine (bm25/tantivy_queries.py): the readers' clauses are part of the scoring
query, so a search returns as many readable hits as it asks for however few documents are readable; typo
look-ups, corrections and counts see only what the readers may read; a new acl re-indexes without new text."""

from __future__ import annotations

import pytest
from acl_scenario import ANA, BOB, DOCS, NOBODY, READS, chunks, docs_of

from hybridsearch.bm25.tantivy_engine import TantivyBm25Engine
from hybridsearch.security.acl import parse_acl
from hybridsearch.v1 import common_pb2


@pytest.fixture
async def engine(tmp_path):
    made = TantivyBm25Engine(tmp_path, "porter", "en_plus", payload_cache=64)
    await made.upsert("c", chunks())
    yield made
    await made.close()


@pytest.mark.parametrize("who", sorted(READS))
async def test_a_search_holds_what_its_readers_read_and_all_of_it(engine, who):
    readers, reads = READS[who]
    (hits,) = await engine.search("c", ["lighthouse keepers"], 10, [], readers=readers)
    assert docs_of(hits) == reads and len(hits) == 2 * len(reads)  # every readable chunk, nothing else
    for doc_id, (_, word) in DOCS.items():  # each document's own word finds it only for its readers
        (own,) = await engine.search("c", [word], 10, [], readers=readers)
        assert docs_of(own) == ({doc_id} & reads)


async def test_counts_and_corrections_see_only_readable_documents(engine):
    for who, (readers, reads) in READS.items():
        stats = await engine.stats("c", readers)
        assert (stats.documents, stats.chunks) == (len(reads), 2 * len(reads)), who
    # "obsidain" is one edit from "obsidian", which only d-sec holds: ana reads it, bob is denied it
    assert await engine.correct("c", "obsidain notes", ANA) == "obsidian notes"
    assert await engine.correct("c", "obsidain notes", BOB) == "obsidain notes"
    assert await engine.correct("c", "obsidain notes", None) == "obsidian notes"
    (for_ana,) = await engine.search("c", ["obsidain"], 10, [], fuzzy=True, readers=ANA)
    (for_bob,) = await engine.search("c", ["obsidain"], 10, [], fuzzy=True, readers=BOB)
    assert docs_of(for_ana) == {"d-sec"} and not for_bob


async def test_metadata_filters_and_readers_hold_together(engine):
    await engine.upsert("f", chunks(tags=True))
    only = [common_pb2.MetadataFilter(field="links", equals="d-pub")]  # every document but d-pub
    (hits,) = await engine.search("f", ["lighthouse"], 10, only, readers=ANA)
    assert docs_of(hits) == {"d-eng", "d-sec", "d-def"}
    either = [common_pb2.MetadataFilter(field="tags", any_of=common_pb2.StringList(values=["gearbox,harbor",
                                                                                       "payroll,harbor"]))]
    (hits,) = await engine.search("f", ["lighthouse"], 10, either, readers=BOB)
    assert docs_of(hits) == {"d-eng", "d-hr"}
    (hits,) = await engine.search("f", ["lighthouse"], 10, either, readers=ANA)
    assert docs_of(hits) == {"d-eng"}
    besides = [common_pb2.MetadataFilter(field="tags", not_equals="gearbox,harbor")]
    (hits,) = await engine.search("f", ["lighthouse"], 10, besides, readers=BOB)
    assert docs_of(hits) == {"d-hr", "d-pub"}


async def test_new_readers_reindex_the_same_text_and_apply_at_once(engine):
    grant = parse_acl(["group:eng", "user:nina"])
    result = await engine.upsert("c", chunks({"d-hr": grant}))
    assert (result.documents_written, result.documents_unchanged) == (1, len(DOCS) - 1)
    (hits,) = await engine.search("c", ["payroll"], 10, [], readers=ANA)
    assert docs_of(hits) == {"d-hr"}
    assert (await engine.upsert("c", chunks({"d-hr": grant}))).documents_unchanged == len(DOCS)  # idempotent
    (stored,) = [c for c in await engine.get_chunks("c", ["d-hr"]) if c.position == 0]
    assert stored.acl == grant  # reconcile copies readers with the chunk


async def test_chunks_written_before_readers_are_the_collection_defaults(tmp_path):
    """A chunk without reader terms (an index written before them) reads as one without an acl."""
    engine = TantivyBm25Engine(tmp_path, "porter", "en_plus")
    old = [c for c in chunks() if c.doc_id == "d-def"]
    collection = engine._collection("c")
    import tantivy  # the index as an older version wrote it: no reader terms at all
    writer = collection.writer
    for c in old:
        doc = collection._document(c, collection.analyzer)
        bare = tantivy.Document()
        for field in ("body", "title_terms", "doc_id"):
            for value in doc.to_dict().get(field, []):
                bare.add_text(field, value)
        bare.add_unsigned("position", c.position)
        bare.add_bytes("payload", doc.to_dict()["payload"][0])
        writer.add_document(bare)
    writer.commit()
    collection._reloaded()
    for readers, found in ((ANA, {"d-def"}), (BOB, set()), (NOBODY, set()), (None, {"d-def"})):
        (hits,) = await engine.search("c", ["quarry"], 10, [], readers=readers)
        assert docs_of(hits) == found
    await engine.close()


async def test_a_readers_ranking_uses_the_idf_of_what_it_reads(engine):
    """A reader's BM25 weights each term by its IDF among the chunks it reads: its ranking is that of a collection
    of only those chunks (scores equal here, where every chunk has the same length; elsewhere the average field
    length stays the whole collection's)."""
    for who in ("ana", "bob", "nobody"):
        readers, reads = READS[who]
        await engine.upsert(f"only-{who}", [c for c in chunks() if c.doc_id in reads])
        for query in ("lighthouse gearbox entries", "payroll meadow part", "obsidian quarry log"):
            (mine,) = await engine.search("c", [query], 10, [], readers=readers)
            (alone,) = await engine.search(f"only-{who}", [query], 10, [])
            assert [h.chunk_id for h in mine] == [h.chunk_id for h in alone], (who, query)
            assert [h.score for h in mine] == pytest.approx([h.score for h in alone], rel=1e-4), (who, query)


async def test_a_readers_counts_are_kept_and_shared_by_its_idf_and_its_corrections(engine):
    """A fuzzy search under readers counts each word among the readable chunks once: the reader's IDF and the typo
    look-ups read the same kept counts (tantivy_queries.kept_count), so another typo of the same words counts
    nothing again; with filters the look-ups count under those too, afresh."""
    collection = engine._collection("c")
    counts: list[int] = []

    class Counting:  # the searcher, its counting searches counted
        def __init__(self, searcher) -> None:
            self.searcher = searcher

        def __getattr__(self, name):
            return getattr(self.searcher, name)

        def search(self, query, limit, count=False, **kwargs):
            counts.append(count)
            return self.searcher.search(query, limit, count=count, **kwargs)
    reader = collection._reader
    collection._reader = lambda: (lambda payloads, searcher: (payloads, Counting(searcher)))(*reader())
    (first,) = await engine.search("c", ["obsidain keepers"], 10, [], fuzzy=True, readers=ANA)
    made = sum(counts)
    assert made and docs_of(first) == READS["ana"][1]
    assert {key[1:] for key in collection._readable_counts} >= {("body", "obsidian"), ("body", "keeper")}
    (again,) = await engine.search("c", ["obsidan keeper"], 10, [], fuzzy=True, readers=ANA)
    assert sum(counts) == made and docs_of(again) == docs_of(first)  # every count kept: none made again
    only = [common_pb2.MetadataFilter(field="tags", not_equals="meadow,harbor")]
    await engine.search("c", ["obsidain keepers"], 10, only, fuzzy=True, readers=ANA)
    assert sum(counts) > made  # under filters the look-ups count afresh (their counts are not the reader's alone)
