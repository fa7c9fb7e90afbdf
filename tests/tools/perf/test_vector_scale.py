"""The vector store at scale, in-process (tools.perf.vector_scale), on a small corpus with static-minilm
vectors: it loads, builds, reopens, measures recall against the exact scan and a write's visibility."""

from __future__ import annotations

import json

from hybridsearch.common.config import Settings
from hybridsearch.tools.perf.vector_scale import run

WORDS = "protein cell galaxy star energy solar wind model data river forest music law trade".split()


def test_loads_builds_and_probes_a_corpus(tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"_id": f"d{i}", "text": f"note {i} " + " ".join(WORDS[(i * j + i) % len(WORDS)] for j in range(12))})
                              + "\n" for i in range(250)))
    settings = Settings(data_dir=tmp_path / "data", vector={"embedder": "static-minilm"})
    seen = []
    result = run(settings, corpus, ["protein energy", "music and law"], "static-minilm", batch=100,
                 progress=seen.append, writes=3, documents_limit=240)
    assert seen == [100, 200]
    assert (result["documents"], result["chunks"], result["vector_points"], result["dim"]) == (240, 240, 240, 256)
    assert result["embedded_now"] == 240 and result["hnsw_build_s"] >= 0
    assert result["ann_recall@10"] == 1.0  # below the full-scan threshold: the served search is exact
    # A write is searchable when it returns, and the probe's writes are gone afterwards.
    assert result["visibility"]["on_first_search"] == 3
    assert result["vector_disk_mib"] > 0 and result["peak_rss_mib"] > 0
