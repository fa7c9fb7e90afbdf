"""The chunk stores on every engine: Qdrant's own engine in-process (qdrant-edge, engine=embedded) and
qdrant-client's local mode (in memory and on disk) run the same behaviour tests; what the adapter sends a
Qdrant server over gRPC is recorded by a gRPC server speaking Qdrant's own protocol (qdrant-client's stubs).

No Qdrant server runs on this machine: HNSW, quantisation, sharding and payload indexes are checked as
the requests that carry them, not as server behaviour (tests/vector/test_edge.py checks them on the edge
engine, which runs Qdrant's segments in-process).
"""

from __future__ import annotations

import grpc
import numpy as np
import pytest
from pydantic import ValidationError
from qdrant_client import grpc as qgrpc
from qdrant_client import models
from qdrant_client.grpc import collections_service_pb2_grpc, points_service_pb2_grpc

from hybridsearch.config.settings import Settings
from hybridsearch.config.stores import VectorSettings
from hybridsearch.contract.errors import Refusal
from hybridsearch.v1 import common_pb2
from hybridsearch.vector.edge import EdgeStore
from hybridsearch.vector.neighbours import EdgeWeights
from hybridsearch.vector.qdrant import QdrantStore
from hybridsearch.vector.store import ChunkPointStore
from hybridsearch.vector.points import VectorSpace, collection_config, payload_indexes, point_id, search_params

# store.py silences local mode's "ignored" warnings at import; pytest resets filters after collection.
pytestmark = [
    pytest.mark.filterwarnings("ignore:Payload indexes have no effect in the local Qdrant"),
    pytest.mark.filterwarnings("ignore:Local mode performs exact"),
    # The client's background version check asks for a REST API the recording server has not got.
    pytest.mark.filterwarnings("ignore:Failed to obtain server version"),
]
DIM = 8
PRODUCTION = VectorSettings(
    hnsw_m=32, hnsw_ef_construct=200, hnsw_ef=64, indexed_fields=["lang", "source"], quantization="int8",
    quantization_quantile=0.95, quantization_oversampling=3.0, on_disk_vectors=True, shard_number=3,
    replication_factor=2, write_consistency_factor=2,
)


def unit(i: int) -> np.ndarray:
    """Orthogonal unit vectors: vector i matches chunk i with cosine 1 and every other with 0."""
    v = np.zeros(DIM, dtype=np.float32)
    v[i] = 1.0
    return v


def chunks_of(doc_id: str, n: int, lang: str, content_hash: str = "h1") -> list[common_pb2.Chunk]:
    return [common_pb2.Chunk(chunk_id=f"{doc_id}#{i}", doc_id=doc_id, position=i, text=f"{doc_id} part {i}",
                             metadata={"lang": lang}, content_hash=content_hash) for i in range(n)]


def open_store(engine: str, tmp_path) -> ChunkPointStore:
    if engine == "edge":
        return EdgeStore(path=tmp_path / "qdrant-edge", dim=DIM, settings=PRODUCTION)
    if engine == "memory":
        return QdrantStore(location=":memory:", dim=DIM, settings=PRODUCTION)
    return QdrantStore(path=tmp_path / "qdrant", dim=DIM, settings=PRODUCTION)


@pytest.fixture(params=["edge", "memory", "path"])
async def store(request, tmp_path):
    s = open_store(request.param, tmp_path)
    yield s
    await s.close()


@pytest.fixture(params=["memory", "path"])
async def local_store(request, tmp_path):
    """qdrant-client's local mode only (its client is inspected)."""
    s = open_store(request.param, tmp_path)
    yield s
    await s.close()


async def seed(store: ChunkPointStore) -> None:
    # a: 2 chunks (vectors 0, 1, English); b: 1 chunk (vector 2, German); c: 1 chunk (vector 3, French)
    chunks = chunks_of("a", 2, "en") + chunks_of("b", 1, "de") + chunks_of("c", 1, "fr")
    written = await store.write("docs", chunks, np.stack([unit(0), unit(1), unit(2), unit(3)]))
    assert (written.documents_written, written.chunks_written) == (3, 4)


async def test_upsert_then_search_finds_the_nearest_chunk(store):
    await seed(store)
    (hits,) = await store.search("docs", unit(1)[None, :], limit=2, filters=[])
    assert hits[0].payload["chunk_id"] == "a#1"
    assert hits[0].score == pytest.approx(1.0, abs=1e-5)
    assert hits[1].score == pytest.approx(0.0, abs=1e-5)
    stats = await store.stats("docs")
    assert (stats.documents, stats.chunks) == (3, 4)
    assert stats.details["hnsw_m"] == "32" and stats.details["quantization"] == "int8"


async def test_metadata_filters(store):
    await seed(store)
    query = (unit(0) + unit(1) + unit(2) + unit(3))[None, :]

    async def docs(flt):
        (hits,) = await store.search("docs", query, limit=10, filters=[flt])
        return sorted({h.payload["doc_id"] for h in hits})

    assert await docs(common_pb2.MetadataFilter(field="lang", equals="de")) == ["b"]
    en_or_fr = common_pb2.StringList(values=["en", "fr"])
    assert await docs(common_pb2.MetadataFilter(field="lang", any_of=en_or_fr)) == ["a", "c"]
    assert await docs(common_pb2.MetadataFilter(field="lang", not_equals="en")) == ["b", "c"]


async def test_delete_removes_every_chunk_of_a_document(store):
    await seed(store)
    assert await store.delete("docs", ["a", "missing"]) == (1, 2)
    (hits,) = await store.search("docs", unit(0)[None, :], limit=10, filters=[])
    assert "a" not in {h.payload["doc_id"] for h in hits}
    stats = await store.stats("docs")
    assert (stats.documents, stats.chunks) == (2, 2)


async def test_rewrites_are_idempotent_and_drop_stale_chunks(store):
    await seed(store)
    same = chunks_of("a", 2, "en") + chunks_of("b", 1, "de")
    assert await store.changed_documents("docs", same) == ([], 2)
    # a now has one chunk and a new hash: changed, and its old second chunk must go.
    shorter = chunks_of("a", 1, "en", content_hash="h2")
    assert await store.changed_documents("docs", shorter) == (["a"], 0)
    await store.write("docs", shorter, unit(4)[None, :])
    await store.write("docs", shorter, unit(4)[None, :])  # twice: same state
    stats = await store.stats("docs")
    assert (stats.documents, stats.chunks) == (3, 3)
    assert await store.content_hashes("docs", ["a", "b"]) == {"a": "h2", "b": "h1"}


async def test_store_specific_chunk_ids_keep_writes_idempotent_and_deletes_complete(store):
    # The gateway names the vector leg's own passages doc#p0, doc#p1, ...; points are keyed by
    # (document, position), so the rewrite and delete logic does not depend on the naming.
    passages = [common_pb2.Chunk(chunk_id=f"a#p{i}", doc_id="a", position=i, text=f"a passage {i}", content_hash="h1")
                for i in range(3)]
    await store.write("docs", passages, np.stack([unit(0), unit(1), unit(2)]))
    assert await store.changed_documents("docs", passages) == ([], 1)
    (hits,) = await store.search("docs", unit(2)[None, :], limit=1, filters=[])
    assert hits[0].payload["chunk_id"] == "a#p2"
    await store.write("docs", passages[:2], np.stack([unit(0), unit(1)]))  # the document shrank
    assert (await store.stats("docs")).chunks == 2
    assert await store.delete("docs", ["a"]) == (1, 2)
    assert (await store.stats("docs")).chunks == 0


def tagged(doc_id: str, i: int, tags: str, lang: str = "en") -> common_pb2.Chunk:
    return common_pb2.Chunk(chunk_id=f"{doc_id}#0", doc_id=doc_id, position=0, text=doc_id, content_hash="h",
                            metadata={"topics": tags, "lang": lang})


async def test_tag_search_matches_tags_exactly_and_ranks_by_matched_count(store):
    chunks = [tagged("both", 0, "Postgres, Indexing"), tagged("one", 1, "postgres"),
              tagged("near", 2, "postgresql, index"), tagged("de", 3, "postgres, indexing", lang="de")]
    await store.write("tags", chunks, np.stack([unit(i) for i in range(4)]), tags_field="topics")
    found = await store.tag_search("tags", ["postgres", "indexing"], 10, [])
    assert [(p["doc_id"], n) for p, n in found][:2] in ([("both", 2), ("de", 2)],)
    assert [p["doc_id"] for p, _ in found] == ["both", "de", "one"]  # "postgresql" and "index" do not match
    lang_en = [common_pb2.MetadataFilter(field="lang", equals="en")]
    assert [p["doc_id"] for p, _ in await store.tag_search("tags", ["postgres", "indexing"], 10, lang_en)] == ["both", "one"]
    assert [p["doc_id"] for p, _ in await store.tag_search("tags", ["postgres"], 1, [])] == ["both"]
    assert await store.tag_search("tags", ["mysql"], 10, []) == []
    assert await store.tag_search("missing", ["postgres"], 10, []) == []


def page(doc_id: str, title: str, text: str, **metadata) -> common_pb2.Chunk:
    return common_pb2.Chunk(chunk_id=f"{doc_id}#0", doc_id=doc_id, position=0, title=title, text=text,
                            content_hash="h", metadata=metadata)


# notes/a.md links to guide/setup.md (Markdown) and to [[Glossary]]; refs/c.md links to a (links field);
# "glossary" is the key of two documents (ambiguous); d.md links to [[a]] (wiki, incoming); e is alone.
LINKED = [
    page("notes/a.md", "A", "See [setup](../guide/setup.md#install) and [[Glossary]].", lang="en"),
    page("guide/setup.md", "Setup guide", "Install it.", lang="en"),
    page("refs/c.md", "C", "Nothing linked in the text.", lang="de", refs="notes/a.md"),
    page("glossary.md", "Glossary", "Terms.", lang="en"),
    page("old/glossary.txt", "Old glossary", "Old terms.", lang="en"),
    page("d.md", "D", "Compare [[a]].", lang="en"),
    page("e.md", "E", "Unlinked.", lang="en"),
]
WEIGHTS = EdgeWeights(explicit=1.0, wiki=0.7, ambiguous=0.4)


async def test_links_ride_with_the_chunks_and_lead_both_ways(store):
    await store.write("links", LINKED, np.stack([unit(i) for i in range(len(LINKED))]), links_field="refs")
    (a,) = await store._payloads("links", [point_id("notes/a.md", 0)], ["links", "wiki", "keys"])
    assert (a["links"], a["wiki"], a["keys"]) == (["guide/setup.md"], ["glossary"], ["a"])
    (c,) = await store._payloads("links", [point_id("refs/c.md", 0)], ["links", "keys"])
    assert c == {"links": ["notes/a.md"], "keys": ["c"]}  # the collection's links field
    edges = await store.link_edges("links", ["notes/a.md"], WEIGHTS)
    # Out: setup (explicit), both glossaries (ambiguous wiki); in: c (explicit), d (wiki by a's key "a").
    assert edges == {"guide/setup.md": 1.0, "refs/c.md": 1.0, "glossary.md": 0.4, "old/glossary.txt": 0.4,
                     "d.md": 0.7}
    # From the other end: setup is reached back from a; a seed is never its own neighbour.
    assert await store.link_edges("links", ["guide/setup.md"], WEIGHTS) == {"notes/a.md": 1.0}
    two = await store.link_edges("links", ["notes/a.md", "refs/c.md"], WEIGHTS)
    assert two["guide/setup.md"] == 1.0 and "refs/c.md" not in two and "notes/a.md" not in two
    assert await store.link_edges("links", ["e.md"], WEIGHTS) == {}
    assert await store.link_edges("missing", ["e.md"], WEIGHTS) == {}
    # Reconcile copies a document's stored chunks to the other store through the same write: links follow.
    copied = await store.get_chunks("links", [c.doc_id for c in LINKED])
    await store.write("copy", copied, np.stack([unit(i) for i in range(len(copied))]), links_field="refs")
    assert await store.link_edges("copy", ["notes/a.md"], WEIGHTS) == edges


async def test_a_search_within_documents_keeps_the_filters(store):
    await store.write("links", LINKED, np.stack([unit(i) for i in range(len(LINKED))]), links_field="refs")
    everything = np.ones(DIM, dtype=np.float32)[None, :]
    (hits,) = await store.search("links", everything, 10, [], within=["refs/c.md", "d.md"])
    assert sorted(h.payload["doc_id"] for h in hits) == ["d.md", "refs/c.md"]
    english = [common_pb2.MetadataFilter(field="lang", equals="en")]
    (hits,) = await store.search("links", everything, 10, english, within=["refs/c.md", "d.md"])
    assert [h.payload["doc_id"] for h in hits] == ["d.md"]


async def test_the_collection_keeps_what_local_mode_keeps(local_store):
    store = local_store
    assert store.name == "qdrant-local"
    await store.ensure_collection("docs")
    info = await store.client.get_collection("docs")
    vectors = info.config.params.vectors
    assert (vectors.size, vectors.distance, vectors.on_disk) == (DIM, models.Distance.COSINE, True)


async def test_local_mode_keeps_each_collections_space(tmp_path):
    """A collection of another embedder (4 dimensions) beside the default's: recorded in the collection's
    metadata, read back by a new process, gone with a drop."""
    other = VectorSpace("static-minilm", 4)
    store = QdrantStore(path=tmp_path / "q", dim=DIM, settings=VectorSettings())
    assert await store.create("notes.g2", other) == other
    await store.write("notes.g2", chunks_of("a", 2, "en"), np.eye(4, dtype=np.float32)[:2])
    await store.write("notes", chunks_of("a", 1, "en"), unit(0)[None, :])
    await store.close()
    reopened = QdrantStore(path=tmp_path / "q", dim=DIM, settings=VectorSettings())
    assert await reopened.collections() == ["notes", "notes.g2"]
    assert await reopened.space_of("notes.g2") == other
    assert await reopened.create("notes.g2", reopened.default_space) == other  # it exists: its own space stands
    assert (await reopened.stats("notes.g2")).details["dim"] == "4"
    assert (await reopened.stats("notes")).details["dim"] == str(DIM)
    (hits,) = await reopened.search("notes.g2", np.eye(4, dtype=np.float32)[1:2], 1, [])
    assert hits[0].payload["chunk_id"] == "a#1"
    assert await reopened.drop("notes.g2") and await reopened.space_of("notes.g2") is None
    await reopened.close()


def test_a_server_keeps_the_default_embedder_only():
    store = QdrantStore(url="http://127.0.0.1:1", dim=DIM, settings=VectorSettings())
    store.check_embedder("minilm-fp32")
    with pytest.raises(Refusal, match="one embedder per deployment on the qdrant server engine") as refused:
        store.check_embedder("static-minilm")
    assert refused.value.code == grpc.StatusCode.FAILED_PRECONDITION


async def test_index_settings_apply_to_an_existing_collection(tmp_path):
    """A field added to indexed_fields later gets its index when a new process opens the collection."""
    first = QdrantStore(path=tmp_path / "q", dim=DIM, settings=VectorSettings())
    await first.ensure_collection("docs")
    await first.close()
    reopened = QdrantStore(path=tmp_path / "q", dim=DIM, settings=PRODUCTION)
    await reopened.ensure_collection("docs")  # exists: no create, the index calls still succeed
    assert await reopened.client.collection_exists("docs")
    await reopened.close()


def test_collection_config_carries_the_settings():
    cfg = collection_config(PRODUCTION, DIM)
    vectors = cfg["vectors_config"]
    assert (vectors.size, vectors.distance, vectors.on_disk) == (DIM, models.Distance.COSINE, True)
    assert (cfg["hnsw_config"].m, cfg["hnsw_config"].ef_construct) == (32, 200)
    scalar = cfg["quantization_config"].scalar
    assert (scalar.type, scalar.quantile, scalar.always_ram) == (models.ScalarType.INT8, 0.95, True)
    assert (cfg["shard_number"], cfg["replication_factor"], cfg["write_consistency_factor"]) == (3, 2, 2)
    assert collection_config(VectorSettings(), DIM)["quantization_config"] is None


def test_payload_indexes_cover_doc_id_position_and_filter_fields():
    assert payload_indexes(PRODUCTION) == {
        "doc_id": models.PayloadSchemaType.KEYWORD, "position": models.PayloadSchemaType.INTEGER,
        "meta.lang": models.PayloadSchemaType.KEYWORD, "meta.source": models.PayloadSchemaType.KEYWORD,
        "tags": models.PayloadSchemaType.KEYWORD, "links": models.PayloadSchemaType.KEYWORD,
        "wiki": models.PayloadSchemaType.KEYWORD, "keys": models.PayloadSchemaType.KEYWORD,
        "acl_allow": models.PayloadSchemaType.KEYWORD, "acl_deny": models.PayloadSchemaType.KEYWORD,
    }


def test_search_params():
    params = search_params(PRODUCTION)
    assert (params.hnsw_ef, params.exact, params.acorn.enable) == (64, False, True)
    assert (params.quantization.rescore, params.quantization.oversampling) == (True, 3.0)
    default = search_params(VectorSettings(hnsw_ef=0, exact=True, acorn=False))
    assert (default.hnsw_ef, default.exact, default.quantization, default.acorn) == (None, True, None, None)


def test_settings_from_environment_and_bad_values(monkeypatch):
    monkeypatch.setenv("HYBRIDSEARCH_VECTOR__INDEXED_FIELDS", '["lang"]')
    monkeypatch.setenv("HYBRIDSEARCH_VECTOR__QUANTIZATION", "int8")
    monkeypatch.setenv("HYBRIDSEARCH_VECTOR__HNSW_EF", "256")
    cfg = Settings().vector
    assert (cfg.indexed_fields, cfg.quantization, cfg.hnsw_ef) == (["lang"], "int8", 256)
    bad_values = ({"quantization": "int4"}, {"shard_number": 0}, {"hnsw_ef_construct": 1},
                  {"quantization_oversampling": 0.5})
    for bad in bad_values:
        with pytest.raises(ValidationError):
            VectorSettings(**bad)


class RecordingQdrant(collections_service_pb2_grpc.CollectionsServicer,
                      points_service_pb2_grpc.PointsServicer):
    """Answers the calls the adapter makes with Qdrant's own messages and keeps each request."""

    def __init__(self) -> None:
        self.requests: list = []

    async def CollectionExists(self, request, context):
        self.requests.append(request)
        return qgrpc.CollectionExistsResponse(result=qgrpc.CollectionExists(exists=False))

    async def Create(self, request, context):
        self.requests.append(request)
        return qgrpc.CollectionOperationResponse(result=True)

    async def CreateFieldIndex(self, request, context):
        self.requests.append(request)
        done = qgrpc.UpdateResult(operation_id=1, status=qgrpc.UpdateStatus.Completed)
        return qgrpc.PointsOperationResponse(result=done)

    async def QueryBatch(self, request, context):
        self.requests.append(request)
        return qgrpc.QueryBatchResponse(result=[qgrpc.BatchResult() for _ in request.query_points])

    async def Count(self, request, context):  # a collection of a million points: searched with its size's beam
        self.requests.append(request)
        return qgrpc.CountResponse(result=qgrpc.CountResult(count=1_000_000))


@pytest.fixture
async def recording_qdrant():
    servicer = RecordingQdrant()
    server = grpc.aio.server()
    collections_service_pb2_grpc.add_CollectionsServicer_to_server(servicer, server)
    points_service_pb2_grpc.add_PointsServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    yield servicer, port
    await server.stop(None)


async def test_server_mode_sends_the_configured_collection_and_search_params(recording_qdrant):
    servicer, port = recording_qdrant
    settings = PRODUCTION.model_copy(update={"qdrant_grpc_port": port})
    store = QdrantStore(url=f"http://127.0.0.1:{port}", dim=DIM, settings=settings)
    assert store.name == "qdrant-server"
    await store.ensure_collection("docs")
    results = await store.search("docs", np.stack([unit(0), unit(1)]), limit=5,
                                 filters=[common_pb2.MetadataFilter(field="lang", equals="en")])
    await store.close()
    assert results == [[], []]

    (create,) = [r for r in servicer.requests if isinstance(r, qgrpc.CreateCollection)]
    assert create.collection_name == "docs"
    params = create.vectors_config.params
    assert (params.size, params.distance, params.on_disk) == (DIM, qgrpc.Distance.Cosine, True)
    assert (create.hnsw_config.m, create.hnsw_config.ef_construct) == (32, 200)
    scalar = create.quantization_config.scalar
    assert (scalar.type, scalar.always_ram) == (qgrpc.QuantizationType.Int8, True)
    assert scalar.quantile == pytest.approx(0.95)
    assert (create.shard_number, create.replication_factor, create.write_consistency_factor) == (3, 2, 2)
    assert create.on_disk_payload is True

    indexes = {r.field_name: r.field_type for r in servicer.requests
               if isinstance(r, qgrpc.CreateFieldIndexCollection)}
    keyword, integer = qgrpc.FieldType.FieldTypeKeyword, qgrpc.FieldType.FieldTypeInteger
    assert indexes == {"doc_id": keyword, "position": integer, "meta.lang": keyword, "meta.source": keyword,
                       "tags": keyword, "links": keyword, "wiki": keyword, "keys": keyword,
                       "acl_allow": keyword, "acl_deny": keyword}

    (batch,) = [r for r in servicer.requests if isinstance(r, qgrpc.QueryBatchPoints)]
    assert len(batch.query_points) == 2
    for query in batch.query_points:
        # hnsw_ef 64 is the least beam: a million points are searched with 768 (vector/beam.py)
        assert (query.params.hnsw_ef, query.params.exact, query.params.acorn.enable) == (768, False, True)
        assert (query.params.quantization.rescore, query.params.quantization.oversampling) == (True, 3.0)
        assert query.filter.must[0].field.key == "meta.lang"
        assert query.limit == 5


async def test_collections_lists_what_was_written_and_drop_removes_it(store):
    assert await store.collections() == []
    await seed(store)
    await store.write("other", chunks_of("x", 1, "en"), unit(4)[None, :])
    assert await store.collections() == ["docs", "other"]
    assert await store.drop("docs") is True
    assert await store.collections() == ["other"]
    assert await store.drop("docs") is False  # idempotent
    assert (await store.stats("docs")).documents == 0
    assert (await store.search("docs", unit(0)[None, :], limit=2, filters=[])) == [[]]
    (hits,) = await store.search("other", unit(4)[None, :], limit=2, filters=[])
    assert [h.payload["doc_id"] for h in hits] == ["x"]
    await seed(store)  # the name starts afresh
    assert (await store.stats("docs")).documents == 3
