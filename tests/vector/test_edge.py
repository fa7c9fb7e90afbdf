"""The embedded store on Qdrant's own engine in-process (qdrant-edge): what the shared behaviour tests in
test_store.py cannot show — persistence across reopen, HNSW recall against exact search on an indexed
shard, writes on top of the index, the background index build, concurrency, and the translation of the
server's collection/search settings and filters into qdrant_edge's classes.

The ANN vectors are synthetic (embedding 20k passages would take minutes): unit vectors with the
neighbourhood structure of MiniLM passage embeddings, `edge_bench.clustered_unit_vectors`.
"""

from __future__ import annotations

import asyncio
import json
import time

import numpy as np
import pytest
import qdrant_edge as qe

from hybridsearch.config.stores import VectorSettings
from hybridsearch.storage.stores import EngineUnavailable
from hybridsearch.v1 import common_pb2
from hybridsearch.storage.stores import COLLECTION_RECORD as SPACE_FILE
from hybridsearch.vector.edge import EdgeStore
from hybridsearch.vector.kept_payloads import COLD_MISSES
from hybridsearch.vector.edge_models import FULL_SCAN_KB, edge_config, edge_filter, edge_search_params
from hybridsearch.tools.perf.edge_bench import chunks_for, clustered_unit_vectors, exact_top_k, recall_at_k, row_of
from hybridsearch.vector.points import FIRST_CHUNKS, VectorSpace, qdrant_filter, search_params

DIM = 8
PRODUCTION = VectorSettings(hnsw_m=32, hnsw_ef_construct=200, hnsw_ef=64, indexed_fields=["lang", "source"],
                            quantization="int8", quantization_quantile=0.95, quantization_oversampling=3.0,
                            on_disk_vectors=True)


def unit_rows(n: int, dim: int = DIM, seed: int = 0) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal((n, dim)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def rows(results) -> list[list[int]]:
    return [[row_of(p) for p in hits] for hits in results]


def lang(value: str) -> list[common_pb2.MetadataFilter]:
    return [common_pb2.MetadataFilter(field="lang", equals=value)]


async def test_reopen_after_close_returns_the_same_results(tmp_path):
    vectors = unit_rows(300)
    store = EdgeStore(path=tmp_path, dim=DIM, settings=PRODUCTION)
    await store.write("docs", chunks_for(0, 300), vectors)
    queries = unit_rows(5, seed=1)
    before = await store.search("docs", queries, 20, lang("de"), with_vectors=True)
    stats = await store.stats("docs")
    await store.close()
    with pytest.raises(EngineUnavailable):
        await store.search("docs", queries, 20, [])

    changed = PRODUCTION.model_copy(update={"hnsw_m": 8, "hnsw_ef_construct": 64})
    reopened = EdgeStore(path=tmp_path, dim=DIM, settings=changed)
    after = await reopened.search("docs", queries, 20, lang("de"), with_vectors=True)
    assert [[(p.payload, p.score, p.vector) for p in hits] for hits in after] == \
        [[(p.payload, p.score, p.vector) for p in hits] for hits in before]
    assert all(p.payload["meta"]["lang"] == "de" for hits in after for p in hits)
    assert (await reopened.stats("docs")).documents == stats.documents == 300
    assert await reopened.content_hashes("docs", ["d0", "d299", "nope"]) == {"d0": "h", "d299": "h"}
    await reopened.close()
    # The settings of the process that opened the shard last are the shard's (segments follow on optimize).
    stored = json.loads((tmp_path / "docs" / "edge_config.json").read_text())
    assert (stored["hnsw_config"]["m"], stored["hnsw_config"]["ef_construct"]) == (8, 64)


async def test_a_missing_collection_is_empty_and_not_created(tmp_path):
    store = EdgeStore(path=tmp_path, dim=DIM, settings=PRODUCTION)
    assert await store.search("nothing", unit_rows(2), 5, []) == [[], []]
    assert (await store.stats("nothing")).chunks == 0
    assert await store.content_hashes("nothing", ["a"]) == {}
    assert await store.delete("nothing", ["a"]) == (0, 0)
    assert not await store.exists("nothing") and not (tmp_path / "nothing").exists()
    await store.close()


async def test_each_shard_keeps_its_own_space_in_its_folder(tmp_path):
    """A collection of another embedder (4 dimensions here) beside the default's (8): each shard is made and
    reopened with its own dimension, and its record rides with its folder (capture, install, drop)."""
    other = VectorSpace("static-minilm", 4)
    store = EdgeStore(path=tmp_path / "edge", dim=DIM, settings=PRODUCTION)
    assert await store.create("notes.g2", other) == other
    assert await store.create("notes.g2", store.default_space) == other  # it exists: its own space stands
    await store.write("notes.g2", chunks_for(0, 20), unit_rows(20, dim=4))
    await store.write("notes", chunks_for(0, 20), unit_rows(20))  # made by a write: the default space
    assert json.loads((tmp_path / "edge" / "notes.g2" / SPACE_FILE).read_text()) == {"embedder": "static-minilm",
                                                                                     "dim": 4}
    assert await store.capture("notes.g2", tmp_path / "captured")
    await store.install("restored", tmp_path / "captured")
    assert await store.drop("notes.g2") and not (tmp_path / "edge" / "notes.g2").exists()
    await store.close()

    reopened = EdgeStore(path=tmp_path / "edge", dim=DIM, settings=PRODUCTION)
    assert await reopened.collections() == ["notes", "restored"]
    assert (await reopened.space_of("restored"), await reopened.space_of("notes")) == (other, reopened.default_space)
    assert (await reopened.stats("restored")).details["dim"] == "4"
    assert (await reopened.stats("notes")).details["dim"] == str(DIM)
    (hits,) = await reopened.search("restored", unit_rows(20, dim=4)[7:8], 1, [])
    assert hits[0].payload["doc_id"] == "d7"
    assert await reopened.space_of("notes.g2") is None
    await reopened.close()


async def test_a_shard_without_a_record_has_the_default_space(tmp_path):
    """Shards made before collections recorded their embedder open as the default embedder's."""
    store = EdgeStore(path=tmp_path, dim=DIM, settings=PRODUCTION)
    await store.write("docs", chunks_for(0, 10), unit_rows(10))
    await store.close()
    (tmp_path / "docs" / SPACE_FILE).unlink()
    reopened = EdgeStore(path=tmp_path, dim=DIM, settings=PRODUCTION)
    assert await reopened.space_of("docs") == VectorSpace(PRODUCTION.embedder, DIM)
    (hits,) = await reopened.search("docs", unit_rows(10)[3:4], 1, [])
    assert hits[0].payload["doc_id"] == "d3"
    await reopened.close()


async def test_an_open_outlives_the_search_that_started_it(tmp_path):
    """A large shard opens slowly (1M points: ~8 s); the searches that want it have shorter deadlines. The
    open goes on when they give up, happens once, and the next search finds the shard open."""
    store = EdgeStore(path=tmp_path, dim=DIM, settings=PRODUCTION)
    await store.write("docs", chunks_for(0, 20), unit_rows(20))
    await store.close()

    reopened = EdgeStore(path=tmp_path, dim=DIM, settings=PRODUCTION)
    opens, real_open = [], reopened._open_sync

    def slow_open(path):
        opens.append(path)
        time.sleep(0.5)
        return real_open(path)

    reopened._open_sync = slow_open
    for _ in range(3):  # each gives up after 0.1 s, as a leg call at its deadline does
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(reopened.search("docs", unit_rows(1), 3, []), 0.1)
    await asyncio.sleep(0.6)
    started = time.perf_counter()
    (hits,) = await reopened.search("docs", unit_rows(1), 3, [])
    assert len(hits) == 3 and time.perf_counter() - started < 0.3
    assert len(opens) == 1 and not reopened._opening
    await reopened.close()


async def test_payload_indexes_follow_the_settings_on_reopen(tmp_path):
    first = EdgeStore(path=tmp_path, dim=DIM, settings=VectorSettings())
    await first.write("docs", chunks_for(0, 10), unit_rows(10))
    assert (await first.stats("docs")).details["payload_indexes"] == "acl_allow,acl_deny,doc_id,keys,links,position,tags,wiki"
    await first.close()
    reopened = EdgeStore(path=tmp_path, dim=DIM, settings=PRODUCTION)
    details = (await reopened.stats("docs")).details
    assert details["payload_indexes"] == "acl_allow,acl_deny,doc_id,keys,links,meta.lang,meta.source,position,tags,wiki"
    await reopened.close()


async def test_writes_are_searchable_at_once_and_indexed_when_writes_pause(tmp_path):
    settings = VectorSettings(edge_index_backlog=300)
    store = EdgeStore(path=tmp_path, dim=DIM, settings=settings, quiet_s=1.0)
    vectors = unit_rows(400)
    await store.write("docs", chunks_for(0, 200), vectors[:200])
    (hits,) = await store.search("docs", vectors[199][None, :], 1, [])
    assert hits[0].payload["doc_id"] == "d199"  # no optimize needed to see a write
    await asyncio.sleep(1.5)  # quiet: flushed, not indexed (200 < backlog)
    details = (await store.stats("docs")).details
    assert (details["indexed_vectors"], details["unindexed_writes"]) == ("0", "200")

    for start in range(200, 400, 50):  # writes keep coming (0.1 s apart, quiet_s 1 s): the build waits
        await store.write("docs", chunks_for(start, 50), vectors[start : start + 50])
        await asyncio.sleep(0.1)
        assert (await store.stats("docs")).details["indexed_vectors"] == "0"
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 30  # the build starts 1 s after the last write; a busy machine makes it slow
    while (details := (await store.stats("docs")).details)["unindexed_writes"] != "0" and loop.time() < deadline:
        await asyncio.sleep(0.1)
    assert (details["indexed_vectors"], details["unindexed_writes"]) == ("400", "0")
    (hits,) = await store.search("docs", vectors[399][None, :], 1, [])
    assert hits[0].payload["doc_id"] == "d399"
    await store.close()


async def test_a_search_does_not_wait_for_a_whole_bulk_write(tmp_path):
    """Edge calls keep the GIL, so they run one at a time, but a write goes in batches and a search
    issued meanwhile runs between two of them."""
    store = EdgeStore(path=tmp_path, dim=DIM, settings=VectorSettings(), quiet_s=3600)
    await store.write("docs", chunks_for(0, 10), unit_rows(10))
    finished: list[str] = []

    async def bulk() -> None:
        await store.write("docs", chunks_for(10, 20_000), unit_rows(20_000))
        finished.append("write")

    async def search() -> None:
        await asyncio.sleep(0.05)  # the write is under way
        await store.search("docs", unit_rows(1), 10, [])
        finished.append("search")

    await asyncio.gather(bulk(), search())
    assert finished == ["search", "write"]
    await store.close()


# --- an HNSW-indexed shard: 20k MiniLM-like vectors, one build, then read, then written on ----------

ANN_POINTS, ANN_DIM, ANN_QUERIES = 20_000, 384, 100


@pytest.fixture(scope="module")
async def indexed(tmp_path_factory):
    settings = VectorSettings(hnsw_m=16, hnsw_ef_construct=100, hnsw_ef=128, indexed_fields=["lang"])
    store = EdgeStore(path=tmp_path_factory.mktemp("ann"), dim=ANN_DIM, settings=settings, quiet_s=3600)
    corpus = clustered_unit_vectors(ANN_POINTS, ANN_DIM, seed=0)
    for start in range(0, ANN_POINTS, 2000):
        await store.write("ann", chunks_for(start, 2000), corpus[start : start + 2000])
    assert await store.optimize("ann")
    yield store, corpus, clustered_unit_vectors(ANN_QUERIES, ANN_DIM, seed=1)
    await store.close()


async def test_the_index_is_hnsw(indexed):
    store, corpus, _ = indexed
    details = (await store.stats("ann")).details
    assert details["indexed_vectors"] == str(ANN_POINTS)
    # Larger than the full-scan threshold: searches walk the graph instead of scanning the segment.
    assert corpus.nbytes > FULL_SCAN_KB * 1024


async def test_ann_recall_at_10_against_exact_search(indexed):
    store, corpus, queries = indexed
    results = await store.search("ann", queries, 10, [])
    recall = recall_at_k(rows(results), exact_top_k(corpus, queries, 10), 10)
    assert recall >= 0.98, recall  # measured 0.995-0.996 over three builds


async def test_filtered_search_on_the_index(indexed):
    store, corpus, queries = indexed
    results = await store.search("ann", queries, 10, lang("de"))
    assert all(p.payload["meta"]["lang"] == "de" for hits in results for p in hits)
    assert all(len(hits) == 10 for hits in results)
    de_rows = np.arange(1, ANN_POINTS, 3)  # chunks_for: lang of row i is ("en", "de", "fr")[i % 3]
    exact = de_rows[exact_top_k(corpus[de_rows], queries, 10)]
    recall = recall_at_k(rows(results), exact, 10)
    # With ACORN (VectorSettings.acorn); without it 0.95-0.96, and 2 of 100 queries got 1-2 hits, not 10.
    assert recall >= 0.98, recall


async def test_deletes_and_replacements_on_the_index_show_at_once(indexed):
    store, corpus, queries = indexed
    (before,) = await store.search("ann", queries[:1], 10, [])
    gone, moved = before[0].payload["doc_id"], before[1].payload["doc_id"]
    assert await store.delete("ann", [gone]) == (1, 1)
    # `moved` now has two chunks: a far vector and, at position 1, a copy of the query.
    far = -queries[0]
    chunks = [common_pb2.Chunk(chunk_id=f"{moved}#{i}", doc_id=moved, position=i, text="new",
                               content_hash="h2") for i in range(2)]
    await store.write("ann", chunks, np.stack([far, queries[0]]))
    (after,) = await store.search("ann", queries[:1], 10, [])
    assert gone not in {p.payload["doc_id"] for p in after}
    assert (after[0].payload["chunk_id"], after[0].payload["text"]) == (f"{moved}#1", "new")
    assert after[0].score == pytest.approx(1.0, abs=1e-4)
    stats = await store.stats("ann")
    assert (stats.documents, stats.chunks) == (ANN_POINTS - 1, ANN_POINTS)
    assert await store.content_hashes("ann", [moved, gone]) == {moved: "h2"}


# --- translation of the server's models ---------------------------------------------------------


def test_edge_config_carries_the_settings():
    cfg = edge_config(PRODUCTION, DIM)
    vectors = cfg.vectors[""]
    assert (vectors.size, vectors.distance, vectors.on_disk) == (DIM, qe.Distance.Cosine, True)
    hnsw = cfg.hnsw_config
    assert (hnsw.m, hnsw.ef_construct, hnsw.full_scan_threshold) == (32, 200, FULL_SCAN_KB)
    q = cfg.quantization_config
    assert (q.type, q.always_ram) == (qe.ScalarType.Int8, True) and q.quantile == pytest.approx(0.95)
    assert cfg.on_disk_payload is True
    # Indexing threshold: half the backlog's vectors (20k x 8 dims x 4 bytes / 2 = 312 KB).
    assert cfg.optimizers.indexing_threshold == 312
    assert edge_config(VectorSettings(), 384).quantization_config is None


def test_edge_search_params():
    params = edge_search_params(search_params(PRODUCTION))
    assert (params.hnsw_ef, params.exact, params.acorn.enable) == (64, False, True)
    assert (params.quantization.rescore, params.quantization.oversampling) == (True, 3.0)
    default = edge_search_params(search_params(VectorSettings(hnsw_ef=0, exact=True, acorn=False)))
    assert (default.hnsw_ef, default.exact, default.quantization, default.acorn) == (None, True, None, None)


def test_edge_filter_translates_every_condition_the_adapter_sends():
    filters = [common_pb2.MetadataFilter(field="lang", equals="en"),
               common_pb2.MetadataFilter(field="source", any_of=common_pb2.StringList(values=["a", "b"])),
               common_pb2.MetadataFilter(field="lang", not_equals="de")]
    flt = edge_filter(qdrant_filter(filters))
    (must_lang, must_source), (not_lang,) = flt.must, flt.must_not
    assert (must_lang.key, must_lang.match.value) == ("meta.lang", "en")
    assert (must_source.key, must_source.match.value) == ("meta.source", ["a", "b"])
    assert (not_lang.key, not_lang.match.value) == ("meta.lang", "de")
    (first,) = edge_filter(FIRST_CHUNKS).must
    assert (first.key, first.match.value) == ("position", 0)
    assert edge_filter(qdrant_filter([])) is None


def found(results) -> list[list[tuple]]:
    return [[(p.payload["doc_id"], round(p.score, 6), p.payload["text"], dict(p.payload["meta"])) for p in hits]
            for hits in results]


@pytest.mark.parametrize("cache", [3, 8192])
async def test_searches_answer_the_same_through_the_payload_cache(tmp_path, cache):
    """VectorSettings.payload_cache: the ids, scores and payloads of a search are the shard's, cached or not (a cache
    smaller than one answer too), and the cache stays within its bound."""
    vectors, queries = unit_rows(300), unit_rows(6, seed=3)
    plain = EdgeStore(path=tmp_path / "off", dim=DIM, settings=PRODUCTION.model_copy(update={"payload_cache": 0}))
    kept = EdgeStore(path=tmp_path / "on", dim=DIM, settings=PRODUCTION.model_copy(update={"payload_cache": cache}))
    for store in (plain, kept):
        await store.write("docs", chunks_for(0, 300), vectors)
    for _ in range(8):  # cold first (the query reads the payloads), then from the cache once its hits are kept
        for flt in ([], lang("de")):
            assert found(await kept.search("docs", queries, 20, flt)) == found(await plain.search("docs", queries, 20, flt))
    assert len(kept._kept["docs"].payloads) <= cache
    assert (kept._kept["docs"].missed < COLD_MISSES) == (cache > 100)  # warm where an answer's hits fit
    await plain.close()
    await kept.close()


async def test_a_write_is_read_at_once_not_its_cached_payload(tmp_path):
    vectors, queries = unit_rows(300), unit_rows(4, seed=5)
    store = EdgeStore(path=tmp_path, dim=DIM, settings=PRODUCTION)
    await store.write("docs", chunks_for(0, 300), vectors)
    for _ in range(10):  # until the cache is warm: its payloads answer, not the query's
        before = await store.search("docs", queries, 30, [])
    shown = sorted({p.payload["doc_id"] for hits in before for p in hits})
    assert store._kept["docs"].payloads and store._kept["docs"].missed < COLD_MISSES
    rewritten = [common_pb2.Chunk(chunk_id=f"{d}#0", doc_id=d, position=0, title="new", text=f"rewritten {d}",
                                  content_hash="h2", metadata={"lang": "xx"}) for d in shown[:5]]
    await store.write("docs", rewritten, vectors[[int(d[1:]) for d in shown[:5]]])
    await store.delete("docs", shown[5:8])
    after = await store.search("docs", queries, 30, [])
    payloads = {p.payload["doc_id"]: p.payload for hits in after for p in hits}
    assert not set(shown[5:8]) & set(payloads)  # deleted: gone at once
    assert all(payloads[d]["text"] == f"rewritten {d}" and payloads[d]["meta"] == {"lang": "xx"}
               for d in shown[:5] if d in payloads) and set(shown[:5]) & set(payloads)
    await store.close()
