"""The BM25-at-scale probe (tools.perf.bm25_scale) on a small corpus: it indexes, reopens and searches."""

from __future__ import annotations

import json

from hybridsearch.config.settings import Settings
from hybridsearch.tools.perf.bm25_scale import run, small_writes


def test_indexes_reopens_and_searches_a_corpus(tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"_id": f"d{i}", "title": f"Note {i}", "text": f"lantern {i} and ranked lists"})
                              + "\n" for i in range(120)))
    seen = []
    result = run(Settings(data_dir=tmp_path / "data"), corpus, ["ranked lantern", "lists"], batch=50, progress=seen.append,
                 writers=0)
    assert (result["documents"], result["chunks"], result["queries"]) == (120, 120, 2)
    assert seen == [50, 100]
    assert result["index_docs_per_s"] > 0 and result["search_p50_ms"] > 0 and result["reopen_s"] >= 0
    assert result["on_disk_bytes"] > 0 and result["peak_rss_mib"] > 0


def test_small_writes_compare_a_commit_per_write_with_group_commit(tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"_id": f"d{i}", "text": f"note {i} on ranked lists"}) + "\n" for i in range(40)))
    result = small_writes(Settings(data_dir=tmp_path / "data"), corpus, writers=4, per_writer=10, rounds=1)
    (alone,), (grouped,) = result["one_commit_per_write"], result["group_commit"]
    assert alone["writes"] == grouped["writes"] == 40
    assert alone["commits"] == 40  # max_group 1: every write its own commit
    assert grouped["commits"] < 40  # four writers at once: writes that queued shared commits
    assert result["throughput_ratio"] > 0
