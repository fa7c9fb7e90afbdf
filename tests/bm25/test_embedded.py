import pytest

from hybridsearch.bm25.embedded import EmbeddedBm25Engine
from hybridsearch.common.chunking import content_hash
from hybridsearch.v1 import common_pb2


def chunk(doc_id, text, title="", n=0, meta=None):
    meta = meta or {}
    return common_pb2.Chunk(chunk_id=f"{doc_id}#{n}", doc_id=doc_id, position=n, title=title, text=text,
                            metadata=meta, content_hash=content_hash(title, text, meta))


@pytest.fixture
def engine(tmp_path):
    return EmbeddedBm25Engine(tmp_path)


async def test_search_ranks_by_bm25_and_survives_reopen(engine, tmp_path):
    await engine.upsert("c", [chunk("a", "protein folding in cells"), chunk("b", "galaxy formation"),
                              chunk("c", "protein protein interactions")])
    (hits,) = await engine.search("c", ["protein"], 10, [])
    assert [h.doc_id for h in hits] == ["c", "a"]
    assert hits[0].rank == 1 and hits[0].score > hits[1].score > 0
    reopened = EmbeddedBm25Engine(tmp_path)
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
    assert [h.doc_id for h in (await engine.search("c", ["shared"], 10, only_de))[0]] == ["b"]
    assert [h.doc_id for h in (await engine.search("c", ["shared"], 10, not_de))[0]] == ["a"]


async def test_title_boost_lifts_title_matches(tmp_path):
    docs = [chunk("a", "solar panels and solar power", title="Wind"), chunk("b", "wind and power", title="Solar")]
    flat = EmbeddedBm25Engine(tmp_path / "flat")
    boosted = EmbeddedBm25Engine(tmp_path / "boosted", title_boost=3.0)
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
