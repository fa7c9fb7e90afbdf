"""An analysis language per collection (Bm25Service.CreateCollection): a generation collection (`notes.g2`)
analyzed in German beside its English alias in one tantivy engine, kept across reopen, a snapshot's capture
and install, and removed by a drop; the engines that keep the declared language only refuse another one."""

from __future__ import annotations


import grpc
import pytest

from loopback import refused, store_stub
from hybridsearch.bm25.embedded import EmbeddedBm25Engine
from hybridsearch.storage.stores import COLLECTION_RECORD as RECORD_FILE
from hybridsearch.bm25.tantivy_engine import TantivyBm25Engine
from hybridsearch.contract.errors import InvalidArgument, Refusal
from hybridsearch.v1 import bm25_pb2, common_pb2

SERVING, GENERATION = "notes", "notes.g2"
# One German text in both: "Häuser" and "Flüsse" meet the queries' "Haus" and "Fluss" only through German stems.
CHUNKS = [
    common_pb2.Chunk(chunk_id="rhein#0", doc_id="rhein", title="Hochwasser am Rhein", content_hash="rhein",
                     text="Nach tagelangem Regen traten die Flüsse über die Ufer; viele Häuser wurden überflutet."),
    common_pb2.Chunk(chunk_id="kaffee#0", doc_id="kaffee", title="Kaffee und Schlaf", content_hash="kaffee",
                     text="Wer abends Kaffee trinkt, schläft später ein."),
]
QUERIES = ["Haus", "Fluss"]


def tantivy(root, hashed: bool = False) -> TantivyBm25Engine:
    """Every collection declared English (a generation has its alias's declared language)."""
    return TantivyBm25Engine(root, "porter", "en_plus", language_of=lambda _c: "en", hashed_of=lambda _c: hashed)


async def found(engine, collection: str) -> list[list[str]]:
    return [[h.doc_id for h in hits] for hits in await engine.search(collection, QUERIES, 10, [])]


async def test_a_german_generation_beside_its_english_alias(tmp_path):
    engine = tantivy(tmp_path)
    assert await engine.create(GENERATION, "de") == (True, "de")
    assert (tmp_path / GENERATION / RECORD_FILE).exists()
    await engine.upsert(SERVING, CHUNKS)  # made by its first write: no record, the declared language
    await engine.upsert(GENERATION, CHUNKS)
    assert not (tmp_path / SERVING / RECORD_FILE).exists()
    assert await found(engine, GENERATION) == [["rhein"], ["rhein"]]  # Häuser -> haus, Flüsse -> fluss
    assert await found(engine, SERVING) == [[], []]  # English keeps häuser and flüsse whole
    assert (await engine.correct(GENERATION, "Häuser")) == "Häuser"  # a known word through German stems
    stats = {name: (await engine.stats(name)).details for name in (SERVING, GENERATION)}
    assert (stats[GENERATION]["language"], stats[SERVING]["language"]) == ("de", "en")
    assert stats[GENERATION]["analyzer"].startswith("german") and stats[SERVING]["analyzer"] == "porter+en_plus-stopwords"
    assert (await engine.stats("never")).details["language"] == "en"
    await engine.close()

    engine = tantivy(tmp_path)  # reopened: each collection keeps its language
    assert await found(engine, GENERATION) == [["rhein"], ["rhein"]]
    assert await found(engine, SERVING) == [[], []]
    assert (await engine.stats(GENERATION)).details["language"] == "de"
    assert await engine.create(GENERATION, "de") == (False, "de")  # idempotent
    assert await engine.create(SERVING, "") == (False, "en")  # no record: its declared language
    for collection, language, held in ((GENERATION, "en", "de"), (GENERATION, "", "de"), (SERVING, "de", "en")):
        with pytest.raises(Refusal) as conflict:
            await engine.create(collection, language)
        assert conflict.value.code == grpc.StatusCode.ALREADY_EXISTS
        assert repr(held) in str(conflict.value) and repr(language or "en") in str(conflict.value)
    with pytest.raises(InvalidArgument, match=r"'klingon' is not supported.*de.*auto"):
        await engine.create("other", "klingon")
    assert await engine.collections() == [SERVING, GENERATION]  # nothing was created by a refusal

    assert await engine.drop(GENERATION) is True
    assert not (tmp_path / GENERATION).exists()  # the record went with the folder
    await engine.upsert(GENERATION, CHUNKS)  # made anew by a write: the declared language
    assert (await engine.stats(GENERATION)).details["language"] == "en"
    assert await found(engine, GENERATION) == [[], []]
    await engine.close()


async def test_a_record_without_an_index_is_no_collection(tmp_path):
    """A create that died between its record and its index left a record only: a write's open removes it."""
    (tmp_path / "left").mkdir()
    (tmp_path / "left" / RECORD_FILE).write_text('{"language": "de"}')
    engine = tantivy(tmp_path)
    assert await engine.collections() == []
    await engine.upsert("left", CHUNKS)
    assert (await engine.stats("left")).details["language"] == "en"
    assert not (tmp_path / "left" / RECORD_FILE).exists()
    await engine.close()


async def test_a_hashed_terms_generation_is_indexed_as_its_terms_come(tmp_path):
    engine = tantivy(tmp_path, hashed=True)
    assert await engine.create(GENERATION, "de") == (True, "de")
    details = (await engine.stats(GENERATION)).details
    assert (details["language"], details["analyzer"]) == ("de", "hashed-terms")
    await engine.close()


async def test_capture_then_install_under_another_name_keeps_the_language(tmp_path):
    engine = tantivy(tmp_path / "store")
    await engine.create(GENERATION, "de")
    await engine.upsert(GENERATION, CHUNKS)
    await engine.upsert(SERVING, CHUNKS)
    staging = tmp_path / "store-staging"
    assert await engine.capture(GENERATION, staging / "g") is True
    assert await engine.capture(SERVING, staging / "s") is True
    assert (staging / "g" / RECORD_FILE).exists() and not (staging / "s" / RECORD_FILE).exists()
    await engine.install("restored", staging / "g")
    assert (await engine.stats("restored")).details["language"] == "de"
    assert await found(engine, "restored") == [["rhein"], ["rhein"]]
    await engine.close()

    engine = tantivy(tmp_path / "store")
    assert await engine.create("restored", "de") == (False, "de")
    assert (await engine.stats("restored")).documents == 2
    await engine.close()


async def test_bm25s_keeps_the_declared_language_only(tmp_path):
    engine = EmbeddedBm25Engine(tmp_path, 1.2, 0.75, "porter", "en_plus", language_of=lambda _c: "en")
    with pytest.raises(Refusal) as refused:
        await engine.create(GENERATION, "de")
    assert refused.value.code == grpc.StatusCode.FAILED_PRECONDITION
    assert "embedded-bm25s" in str(refused.value) and "bm25.engine=embedded" in str(refused.value)
    assert await engine.collections() == []
    with pytest.raises(InvalidArgument):
        await engine.create(GENERATION, "xx")
    assert await engine.create(GENERATION, "") == (True, "en")
    assert await engine.create(GENERATION, "en") == (False, "en")
    assert await engine.collections() == [GENERATION]
    assert (await engine.stats(GENERATION)).details["language"] == "en"
    await engine.close()


async def test_create_collection_over_grpc(tmp_path):
    create = bm25_pb2.CreateBm25CollectionRequest
    async with store_stub("bm25", tantivy(tmp_path / "tantivy")) as stub:
        reply = await stub.CreateCollection(create(collection=GENERATION, language="de"), timeout=10)
        assert (reply.created, reply.language) == (True, "de")
        reply = await stub.CreateCollection(create(collection=GENERATION, language="DE"), timeout=10)
        assert (reply.created, reply.language) == (False, "de")
        await stub.UpsertChunks(common_pb2.UpsertChunksRequest(collection=GENERATION, chunks=CHUNKS), timeout=10)
        search = common_pb2.LegSearchRequest(collection=GENERATION, limit=5, queries=[
            common_pb2.LegQuery(text="Häuser am Fluss", kind=common_pb2.QUERY_KIND_ORIGINAL)])
        assert (await stub.Search(search, timeout=10)).lists[0].hits[0].doc_id == "rhein"
        stats = await stub.Stats(common_pb2.StoreStatsRequest(collection=GENERATION), timeout=10)
        assert (stats.documents, stats.details["language"]) == (2, "de")
        err = await refused(stub.CreateCollection(create(collection=GENERATION, language="en"), timeout=10))
        assert err.code() == grpc.StatusCode.ALREADY_EXISTS and "'de'" in err.details() and "'en'" in err.details()
        err = await refused(stub.CreateCollection(create(collection="other", language="klingon"), timeout=10))
        assert err.code() == grpc.StatusCode.INVALID_ARGUMENT and "klingon" in err.details()
        err = await refused(stub.CreateCollection(create(collection="Bad Name", language="de"), timeout=10))
        assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
        reply = await stub.CreateCollection(create(collection="other"), timeout=10)
        assert (reply.created, reply.language) == (True, "en")

    bm25s = EmbeddedBm25Engine(tmp_path / "bm25s", 1.2, 0.75, "porter", "en_plus", language_of=lambda _c: "en")
    async with store_stub("bm25", bm25s) as stub:
        err = await refused(stub.CreateCollection(create(collection=GENERATION, language="de"), timeout=10))
        assert err.code() == grpc.StatusCode.FAILED_PRECONDITION and "bm25.engine=embedded" in err.details()
