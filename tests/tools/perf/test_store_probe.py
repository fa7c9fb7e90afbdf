"""store-probe on real stores written here: both reopen, recall is measured against the exact scan."""

from __future__ import annotations

import pytest

from hybridsearch.bm25.service import build_engine
from hybridsearch.text.chunking import content_hash
from hybridsearch.config.settings import Settings
from hybridsearch.tools.perf.edge_bench import recall_at_k
from hybridsearch.tools.perf.store_probe import probe
from hybridsearch.v1 import common_pb2
from hybridsearch.vector.edge import EdgeStore
from hybridsearch.vector.embedder import open_embedder

WORDS = "protein cell galaxy star energy solar wind model data river forest music law trade".split()


def test_recall_counts_the_exact_top_k_found():
    assert recall_at_k([["a", "b", "c"], ["x", "y", "z"]], [["a", "b", "d"], ["x", "y", "z"]], 3) == (2 / 3 + 1) / 2
    assert recall_at_k([], [], 10) == 0.0


@pytest.mark.parametrize("embedder, dim", [("minilm-fp32", 384), ("static-minilm", 256)])
async def test_probe_reopens_both_stores_and_measures_recall(tmp_path, embedder, dim):
    # The probe's queries are embedded by the store's own embedder (a 256-dimensional static-minilm store
    # cannot be searched with MiniLM's 384-dimensional query vectors).
    settings = Settings(data_dir=tmp_path, vector={"embedder": embedder})
    chunks = []
    for i in range(300):
        text = " ".join(WORDS[(i * j + i) % len(WORDS)] for j in range(12))
        chunks.append(common_pb2.Chunk(chunk_id=f"d{i}#0", doc_id=f"d{i}", position=0, title="", text=text,
                                       content_hash=content_hash("", text, {})))
    passages = open_embedder(settings.vector.embedder, 128)
    store = EdgeStore(path=tmp_path / "qdrant-edge", dim=passages.dim, settings=settings.vector)
    await store.write("probe", chunks, passages.embed([c.text for c in chunks]))
    await store.close()
    bm25 = build_engine(settings)
    await bm25.upsert("probe", chunks)
    await bm25.close()

    result = await probe(settings, "probe", ["protein energy", "music and law", "river forest trade"], depth=20)
    assert result["vector_points"] == 300 and result["bm25_chunks"] == 300
    assert (result["embedder"], result["dim"]) == (embedder, dim)
    assert result["vector_reopen_s"] > 0 and result["bm25_reopen_s"] > 0
    # 300 points are below the full-scan threshold: the served search is exact, so recall is 1.0
    assert result["ann_recall@10"] == 1.0 and result["ann_recall@20"] == 1.0
