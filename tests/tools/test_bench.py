"""Bench collections are named by the index-time settings, so a cached index is never stale."""

from __future__ import annotations

from pathlib import Path

import pytest

from hybridsearch.tools.bench import collection_name
from hybridsearch.common.config import Settings

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
