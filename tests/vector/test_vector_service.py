"""The vector service: what a LEG_VECTOR list carries below the request's text_depth; an embedder per
collection (CreateCollection), kept across reopen, drop and snapshot, and refused with a clear status when
it cannot be opened."""

from __future__ import annotations

import base64
from contextlib import contextmanager
from types import SimpleNamespace

import grpc
import numpy as np
import pytest

from loopback import refused, store_stub
from hybridsearch.text.chunking import indexed_text
from hybridsearch.config.settings import Settings, get_settings
from hybridsearch.storage.store_servicer import trim_texts
from hybridsearch.storage.stores import SPAN
from hybridsearch.contract.errors import InvalidArgument, Refusal
from hybridsearch.v1 import common_pb2, vector_pb2
from hybridsearch.vector import static
from hybridsearch.vector.embedder import open_embedder
from hybridsearch.vector.dense import VectorEngine
from hybridsearch.vector.points import VectorSpace


def point(i: int, sealed: bool = False) -> SimpleNamespace:
    payload = {"chunk_id": f"d{i}#0", "doc_id": f"d{i}", "meta": {"year": 2000 + i}, SPAN: [i, i + 9, 1, 2]}
    if sealed:
        payload.update(sealed=base64.b64encode(b"blob").decode(), key_id="k1")
    else:
        payload.update(title=f"title {i}", text=f"text of document {i}")
    return SimpleNamespace(payload=payload, score=1.0 - i / 100)


def test_hits_below_the_text_depth_come_without_content_as_trimming_left_them():
    points = [point(i, sealed=i % 3 == 0) for i in range(8)]
    shallow = VectorEngine._ranked(common_pb2.QUERY_KIND_ORIGINAL, "q", points, ("year",), text_depth=3)
    whole = VectorEngine._ranked(common_pb2.QUERY_KIND_ORIGINAL, "q", points, ("year",))
    assert [bool(h.text or h.HasField("sealed")) for h in shallow.hits] == [True] * 3 + [False] * 5
    assert [h.text for h in whole.hits if not h.HasField("sealed")][-1] == "text of document 7"
    assert all(h.metadata["year"] and h.span.end_char for h in shallow.hits)  # ids, metadata, spans for every hit
    assert shallow == trim_texts([whole], 3)[0]


# --- an embedder per collection: a generation (`notes.g2`) embedded with static-minilm beside the default's ---

GENERATION, SERVING = "notes.g2", "notes"
DOCS = {
    "herons": ("Grey herons", "Grey herons winter along the river and fish in the shallows at dawn."),
    "tides": ("Tide tables", "Spring tides follow the full and the new moon; neap tides the quarter moons."),
    "bread": ("Sourdough", "A sourdough starter is flour and water fermented by wild yeast and bacteria."),
}
QUERY = "where do herons fish in winter"


def vector_settings(data_dir) -> Settings:
    return Settings(data_dir=data_dir, vector={"query_cache_redis": False})


def chunks(docs: dict[str, tuple[str, str]] = DOCS) -> list[common_pb2.Chunk]:
    return [common_pb2.Chunk(chunk_id=f"{d}#0", doc_id=d, position=0, title=title, text=text,
                             content_hash=f"h-{d}") for d, (title, text) in docs.items()]


def original(text: str) -> list[common_pb2.LegQuery]:
    return [common_pb2.LegQuery(text=text, kind=common_pb2.QUERY_KIND_ORIGINAL)]


@contextmanager
def no_models(monkeypatch, folder):
    """Models looked up in an empty folder: none is installed (get_settings is cached: cleared both ways)."""
    with monkeypatch.context() as patch:
        patch.setenv("HYBRIDSEARCH_MODELS_DIR", str(folder))
        get_settings.cache_clear()
        try:
            yield
        finally:
            get_settings.cache_clear()


def expected_score(embedder: str, query: str, doc_id: str) -> float:
    """The cosine of the query and the document as `embedder` alone embeds them (queries and passages share
    one encoder for MiniLM and static-minilm)."""
    model = open_embedder(embedder)
    title, text = DOCS[doc_id]
    q, p = model.embed([query, indexed_text(title, "", text)])
    return float(q @ p)


async def test_each_collection_is_embedded_with_its_own_embedder_and_keeps_it(tmp_path):
    settings = vector_settings(tmp_path)
    engine = VectorEngine(settings)
    assert await engine.create(GENERATION, static.NAME) == (True, VectorSpace(static.NAME, 256))
    for collection in (SERVING, GENERATION):  # the serving one made by its first write: the default embedder
        written = await engine.upsert(collection, chunks())
        assert (written.documents_written, written.chunks_written) == (3, 3)
    for collection, embedder, dim in [(SERVING, "minilm-fp32", 384), (GENERATION, static.NAME, 256)]:
        stats = await engine.stats(collection)
        assert (stats.documents, stats.details["embedder"], stats.details["dim"]) == (3, embedder, str(dim))
        plain, rocchio = await engine.search(collection, original(QUERY), 3, [], feedback_docs=2)
        assert plain.hits[0].doc_id == rocchio.hits[0].doc_id == "herons"
        # The collection's own vectors, queried with its own encoder: the score is its embedder's cosine.
        assert plain.hits[0].score == pytest.approx(expected_score(embedder, QUERY, "herons"), abs=1e-4)
        (points,) = await engine.store.search(collection, np.ones((1, dim), dtype=np.float32), 1, [],
                                              with_vectors=True)
        assert len(points[0].vector) == dim
    linked = {"a.md": ("A", "See [the herons](b.md)."), "b.md": ("B", "Grey herons fish at dawn."),
              "c.md": ("C", "Unlinked herons.")}
    await engine.upsert(GENERATION, chunks(linked))
    neighbours = await engine.neighbours(GENERATION, ["a.md"], original("herons")[0], 5, [])
    assert [h.doc_id for h in neighbours.hits] == ["b.md"]

    assert await engine.drop(SERVING) is True
    (plain,) = await engine.search(GENERATION, original(QUERY), 3, [])
    assert plain.hits[0].doc_id == "herons" and (await engine.stats(GENERATION)).documents == 6
    await engine.close()

    reopened = VectorEngine(settings)  # a new process: the record on disk says which embedder
    assert await reopened.collections() == [GENERATION]
    stats = await reopened.stats(GENERATION)
    assert (stats.details["embedder"], stats.details["dim"]) == (static.NAME, "256")
    (plain,) = await reopened.search(GENERATION, original(QUERY), 3, [])
    assert plain.hits[0].score == pytest.approx(expected_score(static.NAME, QUERY, "herons"), abs=1e-4)
    assert await reopened.create(GENERATION, static.NAME) == (False, VectorSpace(static.NAME, 256))
    # The dropped name starts afresh, with the default embedder.
    await reopened.upsert(SERVING, chunks())
    assert (await reopened.stats(SERVING)).details["dim"] == "384"
    await reopened.close()


async def test_a_snapshot_of_a_collection_carries_its_embedder(tmp_path):
    engine = VectorEngine(vector_settings(tmp_path))
    await engine.create(GENERATION, static.NAME)
    await engine.upsert(GENERATION, chunks())
    assert await engine.capture(GENERATION, tmp_path / "captured")
    await engine.install("restored", tmp_path / "captured")
    await engine.drop(GENERATION)
    stats = await engine.stats("restored")
    assert (stats.documents, stats.details["embedder"], stats.details["dim"]) == (3, static.NAME, "256")
    (plain,) = await engine.search("restored", original(QUERY), 3, [])
    assert plain.hits[0].score == pytest.approx(expected_score(static.NAME, QUERY, "herons"), abs=1e-4)
    await engine.close()


async def test_create_collection_is_idempotent_and_refuses_what_it_cannot_keep(tmp_path, monkeypatch):
    engine = VectorEngine(vector_settings(tmp_path))
    assert await engine.create(SERVING, "") == (True, VectorSpace("minilm-fp32", 384))
    assert await engine.create(SERVING, "minilm-fp32") == (False, VectorSpace("minilm-fp32", 384))
    with pytest.raises(Refusal) as conflict:
        await engine.create(SERVING, static.NAME)
    assert conflict.value.code == grpc.StatusCode.ALREADY_EXISTS
    assert "minilm-fp32" in str(conflict.value) and static.NAME in str(conflict.value)
    await engine.upsert("written", chunks())  # made by a write: the default embedder, recorded
    assert await engine.create("written", "") == (False, VectorSpace("minilm-fp32", 384))
    with pytest.raises(InvalidArgument, match=r"unknown embedder 'minilm'.*static-minilm"):
        await engine.create(GENERATION, "minilm")
    with no_models(monkeypatch, tmp_path / "no-models"), \
            pytest.raises(Refusal, match="export-models --embedder static-minilm") as missing:
        await engine.create(GENERATION, static.NAME)
    assert missing.value.code == grpc.StatusCode.FAILED_PRECONDITION
    assert await engine.collections() == [SERVING, "written"]  # nothing was created
    await engine.close()


async def test_create_collection_over_grpc(tmp_path, monkeypatch):
    settings = vector_settings(tmp_path)
    create = vector_pb2.CreateVectorCollectionRequest
    search = common_pb2.LegSearchRequest(collection=GENERATION, queries=original(QUERY), limit=3)
    async with store_stub("vector", VectorEngine(settings)) as stub:
        reply = await stub.CreateCollection(create(collection=GENERATION, embedder=static.NAME), timeout=30)
        assert (reply.created, reply.embedder, reply.dim) == (True, static.NAME, 256)
        reply = await stub.CreateCollection(create(collection=GENERATION, embedder=static.NAME), timeout=30)
        assert (reply.created, reply.embedder, reply.dim) == (False, static.NAME, 256)
        await stub.UpsertChunks(common_pb2.UpsertChunksRequest(collection=GENERATION, chunks=chunks()), timeout=30)
        assert (await stub.Search(search, timeout=30)).lists[0].hits[0].doc_id == "herons"
        stats = await stub.Stats(common_pb2.StoreStatsRequest(collection=GENERATION), timeout=30)
        assert (stats.details["embedder"], stats.details["dim"]) == (static.NAME, "256")
        err = await refused(stub.CreateCollection(create(collection=GENERATION, embedder="minilm-fp32"), timeout=30))
        assert err.code() == grpc.StatusCode.ALREADY_EXISTS and static.NAME in err.details()
        err = await refused(stub.CreateCollection(create(collection="other", embedder="word2vec"), timeout=30))
        assert err.code() == grpc.StatusCode.INVALID_ARGUMENT and "minilm-fp32" in err.details()
        err = await refused(stub.CreateCollection(create(collection="Bad Name", embedder=""), timeout=30))
        assert err.code() == grpc.StatusCode.INVALID_ARGUMENT

    engine = VectorEngine(settings)  # opened while its default model is there
    with no_models(monkeypatch, tmp_path / "no-models"):
        async with store_stub("vector", engine) as stub:
            await refused_without_the_model(stub, search)


async def refused_without_the_model(stub, search: common_pb2.LegSearchRequest) -> None:
    """A service that cannot open a collection's embedder refuses its searches and writes, serves the rest."""
    new = chunks({"new": ("New", "A new document.")})
    for call in (stub.Search(search, timeout=30),
                 stub.UpsertChunks(common_pb2.UpsertChunksRequest(collection=GENERATION, chunks=new), timeout=30),
                 stub.CreateCollection(vector_pb2.CreateVectorCollectionRequest(collection="other.g1",
                                                                                embedder=static.NAME), timeout=30)):
        err = await refused(call)
        assert err.code() == grpc.StatusCode.FAILED_PRECONDITION, err
        assert static.NAME in err.details() and "export-models" in err.details()
    stats = await stub.Stats(common_pb2.StoreStatsRequest(collection=GENERATION), timeout=30)
    assert (stats.documents, stats.details["embedder"]) == (3, static.NAME)  # no model needed
    await stub.UpsertChunks(common_pb2.UpsertChunksRequest(collection=SERVING, chunks=chunks()), timeout=30)
    reply = await stub.Search(common_pb2.LegSearchRequest(collection=SERVING, queries=original(QUERY), limit=3),
                              timeout=30)
    assert reply.lists[0].hits[0].doc_id == "herons"
