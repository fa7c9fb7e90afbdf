"""Snapshots of a collection on OpenSearch (bm25/opensearch_snapshots.py) through the real BM25 store service
over gRPC, against noida-db (a process answering the Elasticsearch 8 REST API, snapshots and restores
included): the cluster snapshots the index into its own registered repository, the hybridsearch repository
keeps the record naming it; a restore under a new name gives back exactly the documents of the snapshot; a
part taken on another engine, a cluster snapshot that is gone, and a deployment without a cluster repository
are refused with the reason, before anything moves in."""

from __future__ import annotations

import uuid

import grpc
import httpx
import pytest
from loopback import refused, store_stub
from noida import noida_server
from stacks import PORT_SHIFT

from hybridsearch.bm25.opensearch import OpenSearchBm25Engine
from hybridsearch.bm25.opensearch_snapshots import RECORD
from hybridsearch.text.chunking import content_hash
from hybridsearch.v1 import common_pb2, stores_pb2

NOIDA_PORT = 29211 + PORT_SHIFT
URL = f"http://127.0.0.1:{NOIDA_PORT}"
CLUSTER_REPOSITORY = "hs-snapshots"


@pytest.fixture(scope="module")
def noida(tmp_path_factory):
    with noida_server(NOIDA_PORT, tmp_path_factory.mktemp("noida")) as proc:
        where = tmp_path_factory.mktemp("cluster-repo")
        answer = httpx.put(f"{URL}/_snapshot/{CLUSTER_REPOSITORY}", json={"type": "fs", "settings": {"location": str(where)}})
        assert answer.status_code == 200, answer.text
        yield proc


@pytest.fixture
def data_dir(tmp_path, monkeypatch):
    from hybridsearch.config.settings import get_settings

    monkeypatch.setenv("HYBRIDSEARCH_DATA_DIR", str(tmp_path / "data"))  # the store service's staging folders
    get_settings.cache_clear()
    yield tmp_path
    get_settings.cache_clear()


def engine(repository: str = CLUSTER_REPOSITORY) -> OpenSearchBm25Engine:
    return OpenSearchBm25Engine(URL, index_prefix=f"s{uuid.uuid4().hex[:8]}-", replicas=0, snapshot_repository=repository)


def chunks(*doc_ids: str) -> list[common_pb2.Chunk]:
    out = []
    for doc_id in doc_ids:
        text = f"Lighthouse keepers log the tide: entry {doc_id}."
        out.append(common_pb2.Chunk(chunk_id=f"{doc_id}#0", doc_id=doc_id, position=0, title=doc_id, text=text,
                                    content_hash=content_hash(doc_id, text, {})))
    return out


async def snapshot(stub, collection: str, repository: str) -> list[stores_pb2.SnapshotFile]:
    progress = [p async for p in stub.SnapshotCollection(stores_pb2.SnapshotStoreRequest(
        collection=collection, snapshot_id=f"{collection}-1", repository=repository))]
    assert progress[0].captured and progress[0].engine == "opensearch-bm25"
    return list(progress[-1].files)


def restore(collection: str, repository: str, phase, files=(), engine_name: str = "opensearch-bm25"):
    return stores_pb2.RestoreStoreRequest(collection=collection, repository=repository, phase=phase, files=list(files),
                                          engine=engine_name if phase == stores_pb2.RESTORE_PHASE_PREPARE else "")


async def held(stub, collection: str) -> list[str]:
    pages = [p async for p in stub.ListDocuments(common_pb2.ListDocumentsRequest(collection=collection))]
    return sorted(d.doc_id for page in pages for d in page.documents)


async def test_a_snapshot_on_opensearch_restores_exactly_its_documents_under_a_new_name(noida, data_dir):
    repo = str(data_dir / "repo")
    async with store_stub("bm25", engine()) as stub:
        await stub.UpsertChunks(common_pb2.UpsertChunksRequest(collection="notes", chunks=chunks("a", "b", "c")))
        files = await snapshot(stub, "notes", repo)
        assert [f.path for f in files] == [RECORD]  # the index is in the cluster's repository; the record here
        await stub.UpsertChunks(common_pb2.UpsertChunksRequest(collection="notes", chunks=chunks("d")))  # after
        await stub.RestoreCollection(restore("notes-copy", repo, stores_pb2.RESTORE_PHASE_PREPARE, files))
        done = await stub.RestoreCollection(restore("notes-copy", repo, stores_pb2.RESTORE_PHASE_COMMIT))
        assert done.installed and not list((data_dir / "data").rglob(RECORD))  # no staging left behind
        assert await held(stub, "notes-copy") == ["a", "b", "c"] and await held(stub, "notes") == ["a", "b", "c", "d"]
        found = await stub.Search(common_pb2.LegSearchRequest(
            collection="notes-copy", queries=[common_pb2.LegQuery(text="lighthouse tide")], limit=10))
        assert sorted(h.doc_id for h in found.lists[0].hits) == ["a", "b", "c"]
        again = await refused(stub.RestoreCollection(restore("notes-copy", repo, stores_pb2.RESTORE_PHASE_PREPARE, files)))
        assert again.code() == grpc.StatusCode.ALREADY_EXISTS

        # a part taken on another engine: its files would not open here
        other = await refused(stub.RestoreCollection(
            restore("notes-x", repo, stores_pb2.RESTORE_PHASE_PREPARE, files, engine_name="embedded-tantivy")))
        assert other.code() == grpc.StatusCode.FAILED_PRECONDITION and "taken on embedded-tantivy" in other.details()
        # the cluster lost the snapshot the record names: refused at PREPARE, nothing moved in
        listed = httpx.get(f"{URL}/_snapshot/{CLUSTER_REPOSITORY}/_all").json()["snapshots"]
        for taken in listed:
            assert httpx.delete(f"{URL}/_snapshot/{CLUSTER_REPOSITORY}/{taken['snapshot']}").status_code == 200
        gone = await refused(stub.RestoreCollection(restore("notes-y", repo, stores_pb2.RESTORE_PHASE_PREPARE, files)))
        assert gone.code() == grpc.StatusCode.FAILED_PRECONDITION and "holds no snapshot" in gone.details(), gone.details()
        listed = await stub.ListCollections(stores_pb2.StoreCollectionsRequest())
        assert [c.name for c in listed.collections] == ["notes", "notes-copy"]


async def test_without_a_cluster_repository_a_snapshot_is_refused_naming_the_setting(noida, data_dir):
    async with store_stub("bm25", engine(repository="")) as stub:
        await stub.UpsertChunks(common_pb2.UpsertChunksRequest(collection="plain", chunks=chunks("a")))
        err = await refused(snapshot(stub, "plain", str(data_dir / "repo")))
        assert err.code() == grpc.StatusCode.UNIMPLEMENTED and "bm25.opensearch_snapshot_repository" in err.details()
