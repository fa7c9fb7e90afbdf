"""Both embedded BM25 engines (tantivy segments, the default; bm25s + SQLite) against the same behaviour."""

import asyncio

import pytest

from hybridsearch.bm25.embedded import EmbeddedBm25Engine
from hybridsearch.bm25.tantivy_engine import TantivyBm25Engine
from hybridsearch.text.chunking import content_hash
from hybridsearch.v1 import common_pb2


def chunk(doc_id, text, title="", n=0, meta=None):
    meta = meta or {}
    return common_pb2.Chunk(chunk_id=f"{doc_id}#{n}", doc_id=doc_id, position=n, title=title, text=text,
                            metadata=meta, content_hash=content_hash(title, text, meta))


# mode -> factory(root, title_boost): the engines build_engine makes for bm25.engine=embedded and bm25s
ENGINES = {
    "embedded": lambda root, title_boost=0.0: TantivyBm25Engine(root, "porter", "en_plus", title_boost),
    "bm25s": lambda root, title_boost=0.0: EmbeddedBm25Engine(root, 1.2, 0.75, "porter", "en_plus", title_boost),
}


@pytest.fixture(params=sorted(ENGINES))
def make(request):
    return ENGINES[request.param]


@pytest.fixture
def engine(make, tmp_path):
    return make(tmp_path)


async def test_search_ranks_by_bm25_and_survives_reopen(engine, make, tmp_path):
    await engine.upsert("c", [chunk("a", "protein folding in cells"), chunk("b", "galaxy formation"),
                              chunk("c", "protein protein interactions")])
    (hits,) = await engine.search("c", ["protein"], 10, [])
    assert [h.doc_id for h in hits] == ["c", "a"]
    assert hits[0].rank == 1 and hits[0].score > hits[1].score > 0
    await engine.close()
    reopened = make(tmp_path)
    (again,) = await reopened.search("c", ["protein"], 10, [])
    assert [h.doc_id for h in again] == ["c", "a"]


async def test_upsert_is_idempotent_and_replaces_changed_documents(engine):
    first = await engine.upsert("c", [chunk("a", "alpha text")])
    assert (first.documents_written, first.documents_unchanged) == (1, 0)
    again = await engine.upsert("c", [chunk("a", "alpha text")])
    assert (again.documents_written, again.documents_unchanged) == (0, 1)
    await engine.upsert("c", [chunk("a", "beta text")])
    assert (await engine.search("c", ["alpha"], 10, []))[0] == []
    assert [h.doc_id for h in (await engine.search("c", ["beta"], 10, []))[0]] == ["a"]
    assert (await engine.stats("c")).chunks == 1


async def test_delete_removes_every_chunk(engine):
    await engine.upsert("c", [chunk("a", "one", n=0), chunk("a", "two", n=1), chunk("b", "one")])
    assert await engine.delete("c", ["a", "missing"]) == (1, 2)
    (hits,) = await engine.search("c", ["one"], 10, [])
    assert [h.doc_id for h in hits] == ["b"]


async def test_filters_apply_inside_the_search(engine):
    await engine.upsert("c", [chunk("a", "shared words", meta={"lang": "en"}), chunk("b", "shared words", meta={"lang": "de"})])
    only_de = [common_pb2.MetadataFilter(field="lang", equals="de")]
    not_de = [common_pb2.MetadataFilter(field="lang", not_equals="de")]
    either = [common_pb2.MetadataFilter(field="lang", any_of=common_pb2.StringList(values=["de", "fr"]))]
    assert [h.doc_id for h in (await engine.search("c", ["shared"], 10, only_de))[0]] == ["b"]
    assert [h.doc_id for h in (await engine.search("c", ["shared"], 10, not_de))[0]] == ["a"]
    assert [h.doc_id for h in (await engine.search("c", ["shared"], 10, either))[0]] == ["b"]
    # a filter alone matches nothing: only documents that match a query term are hits
    assert (await engine.search("c", ["absent"], 10, only_de))[0] == []


async def test_hits_bring_back_only_the_metadata_fields_asked_for(engine):
    await engine.upsert("c", [chunk("a", "shared words", meta={"type": "decision", "lang": "en"}),
                              chunk("b", "shared words", meta={"lang": "de"})])
    (hits,) = await engine.search("c", ["shared"], 10, [], ("type", "status"))
    assert {h.doc_id: dict(h.metadata) for h in hits} == {"a": {"type": "decision"}, "b": {}}
    (plain,) = await engine.search("c", ["shared"], 10, [])
    assert all(not h.metadata for h in plain)


async def test_tantivy_scores_equal_bm25s_and_rank_the_same(tmp_path):
    """Lucene BM25 on both engines: the same ranking, scores within tantivy's one-byte length norms."""
    words = "protein folding cell galaxy star formation energy solar wind power model data".split()
    docs = [chunk(f"d{i}", " ".join(words[(i * j) % len(words)] for j in range(3 + i % 7))) for i in range(40)]
    tantivy_engine, bm25s_engine = ENGINES["embedded"](tmp_path / "t"), ENGINES["bm25s"](tmp_path / "b")
    for e in (tantivy_engine, bm25s_engine):
        await e.upsert("c", docs)
    for query in ["protein energy", "solar wind power", "galaxy"]:
        (a,), (b,) = await tantivy_engine.search("c", [query], 20, []), await bm25s_engine.search("c", [query], 20, [])
        assert {h.doc_id for h in a} == {h.doc_id for h in b}
        scores = {h.doc_id: h.score for h in b}
        for hit in a:
            assert hit.score == pytest.approx(scores[hit.doc_id], rel=0.05)


async def test_tantivy_write_is_searchable_when_acknowledged_and_searches_run_during_writes(tmp_path):
    engine = ENGINES["embedded"](tmp_path)
    await engine.upsert("c", [chunk(f"base{i}", f"filler text number {i}") for i in range(200)])

    async def writes():
        for i in range(30):
            await engine.upsert("c", [chunk(f"new{i}", f"fresh marker{i} words")])
            (hits,) = await engine.search("c", [f"marker{i}"], 10, [])
            assert [h.doc_id for h in hits] == [f"new{i}"]  # read-your-write, no wait

    async def reads():
        for _ in range(30):
            (hits,) = await engine.search("c", ["filler"], 5, [])
            assert len(hits) == 5

    await asyncio.gather(writes(), reads())
    stats = await engine.stats("c")
    assert (stats.documents, stats.chunks) == (230, 230)
    assert int(stats.details["segments"]) >= 1


async def test_title_boost_lifts_title_matches(make, tmp_path):
    docs = [chunk("a", "solar panels and solar power", title="Wind"), chunk("b", "wind and power", title="Solar")]
    flat = make(tmp_path / "flat")
    boosted = make(tmp_path / "boosted", title_boost=3.0)
    for engine in (flat, boosted):
        await engine.upsert("c", docs)
    assert (await flat.search("c", ["solar"], 10, []))[0][0].doc_id == "a"
    assert (await boosted.search("c", ["solar"], 10, []))[0][0].doc_id == "b"


@pytest.mark.parametrize("queries", [["the of and"], ["zzzunknown"], ["!!!"]])
async def test_queries_with_nothing_to_match_return_empty_lists(engine, queries):
    await engine.upsert("c", [chunk("a", "some text")])
    assert await engine.search("c", queries, 10, []) == [[]]


async def test_unknown_collection_is_empty(engine):
    assert await engine.search("nope", ["x"], 10, []) == [[]]
    assert (await engine.stats("nope")).documents == 0


FUZZY_DOCS = [chunk("a", "protein folding in living cells"), chunk("b", "galaxy formation and dark matter"),
              chunk("c", "holding patterns of aircraft")]


async def test_fuzzy_matches_a_typo_below_what_the_exact_word_scores(engine):
    from hybridsearch.bm25.fuzzy import FUZZY_WEIGHT

    await engine.upsert("c", FUZZY_DOCS)
    assert await engine.search("c", ["protien"], 10, []) == [[]]  # off by default
    (exact,) = await engine.search("c", ["protein"], 10, [])
    (typo,) = await engine.search("c", ["protien"], 10, [], fuzzy=True)
    assert [h.doc_id for h in typo] == [h.doc_id for h in exact] == ["a"]
    assert typo[0].score == pytest.approx(FUZZY_WEIGHT * exact[0].score, rel=1e-4)


async def test_fuzzy_completes_a_cut_word_and_leaves_known_words_alone(engine):
    await engine.upsert("c", FUZZY_DOCS)
    (cut,) = await engine.search("c", ["galax"], 10, [], fuzzy=True)
    assert [h.doc_id for h in cut] == ["b"]
    # "folding" is indexed: "holding" (one edit away) must not join in.
    (clean,) = await engine.search("c", ["folding"], 10, [])
    (fuzzy,) = await engine.search("c", ["folding"], 10, [], fuzzy=True)
    assert [(h.doc_id, h.score) for h in fuzzy] == [(h.doc_id, h.score) for h in clean] and len(clean) == 1


async def test_declared_fields_are_scored_with_their_boosts(tmp_path):
    """CodeRAG's boosts: a summary match at 2.0 outranks a shorter document matching in its text only;
    a path match at 0.5 adds less than the same summary match; documents without the fields are fine."""
    docs = [chunk("long", "an lru cache evicts the least recently used entry when it runs out of room for more",
                  meta={"summary": "lru cache", "path": "src/cache.ts"}),
            chunk("short", "lru cache", meta={"path": "src/lru.ts"}),
            chunk("bare", "cache entry")]
    plain = TantivyBm25Engine(tmp_path / "plain", "porter", "en_plus")
    fields = {"summary": 2.0, "name": 1.5, "path": 0.5}
    boosted = TantivyBm25Engine(tmp_path / "boosted", "porter", "en_plus",
                                fields_of=lambda collection: fields if collection == "code" else {})
    await plain.upsert("code", docs)
    await boosted.upsert("code", docs)
    (before,), (after,) = await plain.search("code", ["lru"], 10, []), await boosted.search("code", ["lru"], 10, [])
    assert [h.doc_id for h in before] == ["short", "long"]
    assert [h.doc_id for h in after] == ["long", "short"]
    # The path field scores "lru" in src/lru.ts at half weight: added to the text's score, not replacing it.
    assert after[1].score > before[0].score
    (cache,) = await boosted.search("code", ["cache"], 10, [])
    assert {h.doc_id for h in cache} == {"long", "short", "bare"}
    # A collection that declares no fields scores as before, on the same engine.
    await boosted.upsert("other", docs)
    assert [(h.doc_id, h.score) for h in (await boosted.search("other", ["lru"], 10, []))[0]] == \
        [(h.doc_id, h.score) for h in before]


async def test_an_index_written_with_other_fields_is_refused_clearly(tmp_path):
    first = TantivyBm25Engine(tmp_path, "porter", "en_plus")
    await first.upsert("code", [chunk("a", "text")])
    await first.close()
    again = TantivyBm25Engine(tmp_path, "porter", "en_plus", fields_of=lambda collection: {"summary": 2.0})
    with pytest.raises(ValueError, match="other text fields.*re-ingest"):
        await again.search("code", ["text"], 10, [])


async def test_correct_rewrites_unknown_words_for_the_vector_leg(engine):
    await engine.upsert("c", FUZZY_DOCS)
    assert await engine.correct("c", "Protien foldnig, galaxy") == "protein folding, galaxy"
    assert await engine.correct("nope", "protien") == "protien"  # an unknown collection: as typed


async def test_collections_lists_what_was_written_and_drop_removes_it(engine, make, tmp_path):
    assert await engine.collections() == []
    await engine.upsert("c", [chunk("a", "protein folding", n=0), chunk("a", "in cells", n=1)])
    await engine.upsert("keep", [chunk("k", "galaxy formation")])
    assert await engine.collections() == ["c", "keep"]
    assert await engine.drop("c") is True
    assert await engine.collections() == ["keep"]
    assert not (tmp_path / "c").exists()
    assert (await engine.search("c", ["protein"], 10, [])) == [[]]
    assert (await engine.stats("c")).documents == 0
    assert await engine.drop("c") is False  # idempotent
    assert [h.doc_id for h in (await engine.search("keep", ["galaxy"], 10, []))[0]] == ["k"]
    # A dropped name starts afresh on its next write, and another process sees the same listing.
    await engine.upsert("c", [chunk("b", "protein again")])
    assert [h.doc_id for h in (await engine.search("c", ["protein"], 10, []))[0]] == ["b"]
    await engine.close()
    assert await make(tmp_path).collections() == ["c", "keep"]
