"""The tantivy collection's payload cache (Bm25Settings.payload_cache): the ranking path reads each hit's parsed
payload once per reader; a write's reload starts a new cache, so no search answers from a payload written over."""

from __future__ import annotations

import pytest

from hybridsearch.bm25.tantivy_engine import TantivyBm25Engine
from hybridsearch.v1 import common_pb2


def chunk(i: int, text: str, year: str = "2000") -> common_pb2.Chunk:
    return common_pb2.Chunk(chunk_id=f"d{i}#0", doc_id=f"d{i}", title=f"title {i}", text=text, metadata={"year": year},
                            content_hash=f"h{i}-{year}", span=common_pb2.SourceSpan(start_char=i, end_char=i + 9))


def seen(hits) -> list[tuple]:
    return [(h.chunk_id, h.rank, round(h.score, 6), h.title, h.text, dict(h.metadata), h.span.end_char) for h in hits]


@pytest.mark.parametrize("cache", [0, 3, 8192])
async def test_searches_answer_the_same_with_and_without_the_cache(tmp_path, cache):
    engine = TantivyBm25Engine(tmp_path / "on", "porter", "en_plus", payload_cache=cache)
    plain = TantivyBm25Engine(tmp_path / "off", "porter", "en_plus")
    chunks = [chunk(i, "lighthouse " * (i + 1) + "keepers") for i in range(8)]
    for e in (engine, plain):
        await e.upsert("c", chunks)
    for _ in range(3):  # the second and third from the cache
        for query in ("lighthouse", "keepers", "lighthouse keepers"):
            got = await engine.search("c", [query], 8, [], ("year",), text_depth=3)
            assert seen(got[0]) == seen((await plain.search("c", [query], 8, [], ("year",), text_depth=3))[0])
    collection = engine._collection("c")
    assert len(collection._payloads) <= cache  # bounded (0: none kept)
    await engine.close()
    await plain.close()


async def test_a_write_is_read_at_once_not_its_cached_payload(tmp_path):
    engine = TantivyBm25Engine(tmp_path, "porter", "en_plus", payload_cache=8192)
    await engine.upsert("c", [chunk(i, "lighthouse keepers") for i in range(4)])
    (before,) = await engine.search("c", ["lighthouse"], 10, [], ("year",))
    assert {h.metadata["year"] for h in before} == {"2000"}
    await engine.upsert("c", [chunk(2, "lighthouse keepers of the coast", year="2024")])  # written over
    await engine.delete("c", ["d1"])
    await engine.upsert("c", [chunk(9, "lighthouse")])  # new segments: the ordinals name other documents
    (after,) = await engine.search("c", ["lighthouse"], 10, [], ("year",))
    by_id = {h.doc_id: h for h in after}
    assert set(by_id) == {"d0", "d2", "d3", "d9"}
    assert by_id["d2"].metadata["year"] == "2024" and by_id["d2"].text == "lighthouse keepers of the coast"
    assert all(h.chunk_id == f"{h.doc_id}#0" for h in after)  # each hit's own payload, none another's
    await engine.close()


async def test_every_hit_is_its_own_document_while_segments_merge_under_the_cache(tmp_path):
    """Many small commits make segments that tantivy merges: the ordinals of the documents that remain change, so a
    cache kept across a reload would answer one document's address with another's payload."""
    engine = TantivyBm25Engine(tmp_path, "porter", "en_plus", payload_cache=8192)
    live: dict[str, str] = {}
    for n in range(40):
        doc = f"d{n % 13}"
        await engine.upsert("c", [common_pb2.Chunk(chunk_id=f"{doc}#0", doc_id=doc, text=f"lighthouse {'keeper ' * (n % 5)}",
                                                   metadata={"written": str(n)}, content_hash=f"h{n}")])
        live[doc] = str(n)
        if n % 7 == 3:
            gone = f"d{(n + 5) % 13}"
            await engine.delete("c", [gone])
            live.pop(gone, None)
        (hits,) = await engine.search("c", ["lighthouse"], 50, [], ("written",))
        assert sorted(h.doc_id for h in hits) == sorted(live)  # each live document once
        assert {h.doc_id: h.metadata["written"] for h in hits} == live  # with its own, latest payload
    await engine.close()
