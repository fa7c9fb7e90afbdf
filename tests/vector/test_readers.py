"""Document readers in the vector stores (vector/points.readers_filter): qdrant-edge and qdrant-client's local mode
filter by the readers inside the search (a Qdrant payload filter, as a server is sent), so a search returns as many
readable hits as it asks for; the tag leg, link expansion and counts see only what the readers read; new readers
rewrite payloads, vectors kept."""

from __future__ import annotations

import numpy as np
import pytest
from acl_scenario import ANA, BOB, DOCS, READS, chunks

from hybridsearch.security.acl import parse_acl
from hybridsearch.vector.neighbours import EdgeWeights
from hybridsearch.config.search import GraphSettings
from test_store import DIM, open_store, recording_qdrant  # noqa: F401  (a fixture)


def vectors(n: int) -> np.ndarray:
    x = np.random.default_rng(7).standard_normal((n, DIM)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


@pytest.fixture(params=["edge", "memory"])
async def store(request, tmp_path):
    made = open_store(request.param, tmp_path)
    written = chunks(tags=True)
    await made.write("c", written, vectors(len(written)))
    yield made
    await made.close()


async def test_every_readable_chunk_and_nothing_else(store):
    query = vectors(1)
    for who, (readers, reads) in READS.items():
        (points,) = await store.search("c", query, 10, [], readers=readers)
        assert {p.payload["doc_id"] for p in points} == reads and len(points) == 2 * len(reads), who
        stats = await store.stats("c", readers)
        assert (stats.documents, stats.chunks) == (len(reads), 2 * len(reads)), who


async def test_tags_and_links_only_of_readable_documents(store):
    words = [word for _, word in DOCS.values()]
    for who, (readers, reads) in READS.items():
        found = await store.tag_search("c", [*words, "harbor"], 10, [], readers)
        assert {payload["doc_id"] for payload, _ in found} == reads, who
    weights = EdgeWeights.of(GraphSettings())
    # every document links to d-pub (d-pub to d-hr): d-pub's neighbours are those linking to it, and d-hr
    assert set(await store.link_edges("c", ["d-pub"], weights, ANA)) == {"d-eng", "d-sec", "d-def"}
    assert set(await store.link_edges("c", ["d-pub"], weights, BOB)) == {"d-eng", "d-hr"}
    assert set(await store.link_edges("c", ["d-pub"], weights, None)) == set(DOCS) - {"d-pub"}


async def test_new_readers_rewrite_payloads_and_keep_vectors(store):
    grant = parse_acl(["group:eng"])
    changed = chunks({"d-hr": grant}, tags=True)
    (before,) = await store.search("c", vectors(1), 10, [], with_vectors=True)
    relabelled = await store.set_readers("c", changed)
    assert (relabelled.documents_written, relabelled.chunks_written) == (1, 2)
    assert (await store.set_readers("c", changed)).documents_written == 0  # already so
    (after,) = await store.search("c", vectors(1), 10, [], readers=ANA, with_vectors=True)
    assert "d-hr" in {p.payload["doc_id"] for p in after}
    kept = {p.id: p.vector for p in before}
    for p in after:
        assert np.allclose(p.vector, kept[p.id], atol=1e-2)
    (stored,) = [c for c in await store.get_chunks("c", ["d-hr"]) if c.position == 0]
    assert stored.acl == grant


async def test_a_qdrant_server_is_sent_the_readers_filter(recording_qdrant):  # noqa: F811  (the fixture)
    """The server path: the readers as the search's own filter, next to the metadata filters, on the wire."""
    from hybridsearch.vector.qdrant import QdrantStore
    from test_store import PRODUCTION
    from qdrant_client.grpc import QueryBatchPoints

    servicer, port = recording_qdrant
    store = QdrantStore(url=f"http://127.0.0.1:{port}", dim=DIM,
                        settings=PRODUCTION.model_copy(update={"qdrant_grpc_port": port}))
    await store.ensure_collection("docs")
    await store.search("docs", vectors(1), limit=5, filters=[], readers=ANA)
    await store.close()
    (batch,) = [r for r in servicer.requests if isinstance(r, QueryBatchPoints)]
    (readers,) = [c.filter for c in batch.query_points[0].filter.must]
    allow, unset = readers.should
    assert (allow.field.key, sorted(allow.field.match.keywords.strings)) == ("acl_allow", ["*", "@default", "group:eng",
                                                                                         "user:ana"])
    assert unset.is_empty.key == "acl_allow"  # written before readers: the collection default's, which admits ana
    (denied,) = readers.must_not
    assert (denied.field.key, sorted(denied.field.match.keywords.strings)) == ("acl_deny", ["group:eng", "user:ana"])


async def test_a_listing_names_each_documents_readers(store):
    """What reconcile compares (StoredDocument.readers): the same for the same readers, another after a change."""
    before = {d.doc_id: d for d in await store.list_documents("c")}
    assert len({before[d].readers for d in ("d-eng", "d-hr", "d-sec", "d-pub", "d-def")}) == 5
    changed = chunks({"d-hr": parse_acl(["group:eng"])}, tags=True)
    for c in changed:
        c.written_at_ms = 42
    await store.set_readers("c", changed)
    after = {d.doc_id: d for d in await store.list_documents("c")}
    assert after["d-hr"].readers == before["d-eng"].readers and after["d-hr"].written_at_ms == 42
    assert not after["d-hr"].torn and after["d-pub"] == before["d-pub"]
