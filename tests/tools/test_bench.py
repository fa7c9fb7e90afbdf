"""Bench collections are named by the index-time settings, so a cached index is never stale."""

from __future__ import annotations

from pathlib import Path

import pytest

from hybridsearch.tools.bench import CALIBRATION_POOLS, TOP_FIELDS, collection_name, pool
from hybridsearch.config.settings import Settings
from hybridsearch.v1 import search_pb2

FOLDER = Path("../shared/datasets/SciFact")


@pytest.mark.parametrize("changes", [
    {"bm25": {"stopwords": "lucene"}},
    {"vector": {"embedder": "mpnet-fp32"}},
    {"vector": {"chunk_words": 128}},
    {"chunk_words": 200},
])
def test_index_time_settings_get_their_own_collection(changes):
    assert collection_name(FOLDER, Settings(**changes)) != collection_name(FOLDER, Settings())


def test_query_time_settings_reuse_the_index():
    tuned = Settings(fusion={"bm25_weight": 0.1}, bm25={"title_boost": 0.3})
    assert collection_name(FOLDER, tuned) == collection_name(FOLDER, Settings())
    bm25s = Settings(bm25={"engine": "bm25s", "k1": 0.9, "b": 0.4})  # k1 and b are query-time on bm25s
    assert collection_name(FOLDER, bm25s) == collection_name(FOLDER, Settings(bm25={"engine": "bm25s"}))
    assert collection_name(FOLDER, Settings()).startswith("bench-scifact-")


def test_bench_requests_leave_fuzzy_to_the_collection_unless_told():
    from hybridsearch.tools.bench import BENCH_MODES

    assert not BENCH_MODES["bm25"].request("q", "c").HasField("fuzzy")
    assert BENCH_MODES["bm25"].request("q", "c", fuzzy=True).fuzzy is True
    off = BENCH_MODES["default"].request("q", "c", fuzzy=False)
    assert off.HasField("fuzzy") and off.fuzzy is False


def test_calibration_pools_take_each_hits_scores_and_judgment():
    pooled, tops = {name: [] for name in CALIBRATION_POOLS}, {field: [] for field in TOP_FIELDS}
    hits = [search_pb2.SearchHit(doc_id=f"d{i}", score=0.7 - i / 100, blended_score=1.0 - i / 50) for i in range(12)]
    pool(pooled, tops, hits, {"d0": 1, "d11": 2, "d3": 0})
    pool(pooled, tops, [], {"d0": 1})  # a query without hits
    assert len(pooled["score"]) == 12 and len(pooled["score@10"]) == 10
    assert [r for _, r in pooled["score"]] == [i in (0, 11) for i in range(12)]
    assert pooled["blended_score"][1] == (pytest.approx(0.98), False)
    assert tops == {"score": [pytest.approx(0.7), 0.0], "blended_score": [1.0, 0.0]}
