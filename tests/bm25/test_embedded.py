"""Both embedded BM25 engines (tantivy segments, the default; bm25s + SQLite) against the same behaviour."""

import asyncio

import pytest

from hybridsearch.bm25.embedded import EmbeddedBm25Engine
from hybridsearch.bm25.tantivy_engine import TantivyBm25Engine
from hybridsearch.common.chunking import content_hash
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
