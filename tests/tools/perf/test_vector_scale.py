"""The vector store at scale, in-process (tools.perf.vector_scale), on a small corpus with static-minilm
vectors: it loads, builds, reopens, measures recall against the exact scan and a write's visibility."""

from __future__ import annotations

import json

from hybridsearch.config.settings import Settings
from hybridsearch.tools.perf.vector_scale import LOADED, run

WORDS = "protein cell galaxy star energy solar wind model data river forest music law trade".split()


def write_corpus(tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"_id": f"d{i}", "text": f"note {i} " + " ".join(WORDS[(i * j + i) % len(WORDS)] for j in range(12))})
                              + "\n" for i in range(250)))
    return corpus


def test_loads_builds_and_probes_a_corpus(tmp_path):
    corpus = write_corpus(tmp_path)
    settings = Settings(data_dir=tmp_path / "data", vector={"embedder": "static-minilm"})
    seen, records = [], []
    result = run(settings, corpus, ["protein energy", "music and law"], "static-minilm", batch=100,
                 progress=seen.append, writes=3, documents_limit=240, record=lambda out: records.append(dict(out)))
    assert seen == [100, 200]
    assert (result["documents"], result["chunks"], result["vector_points"], result["dim"]) == (240, 240, 240, 256)
    assert result["embedded_now"] == 240 and result["hnsw_build_s"] >= 0
    assert result["ann_recall@10"] == 1.0  # below the full-scan threshold: the served search is exact
    # A write is searchable when it returns, and the probe's writes are gone afterwards.
    assert result["visibility"]["on_first_search"] == 3
    assert result["vector_disk_mib"] > 0 and result["peak_rss_mib"] > 0
    # The figures were handed out after each phase (load, build, probe, visibility), the settings with them.
    assert ["load_s" in r for r in records] == [True] * 4
    assert ["hnsw_build_s" in r for r in records] == [False, True, True, True]
    assert ["ann_recall@10" in r for r in records] == [False, False, True, True]
    assert records[-1] == result and result["settings"]["hnsw_m"] == 16


def test_a_second_run_resumes_the_store_it_finds_and_probes_other_beams(tmp_path):
    corpus = write_corpus(tmp_path)
    settings = Settings(data_dir=tmp_path / "data", vector={"embedder": "static-minilm", "quantization": "int8"})
    run(settings, corpus, ["protein energy"], "static-minilm", batch=100, writes=1, documents_limit=240)
    again = run(settings, corpus, ["protein energy", "music and law"], "static-minilm", batch=100, writes=1,
                efs=(16, 64))
    # not loaded again (the corpus holds 250): the first run's load figures, kept beside the store
    assert again["resumed"]["points"] == 240 and again["documents"] == 240 and again["load_s"] >= 0
    assert again["vector_points"] == 240 and again["settings"]["quantization"] == "int8"
    for beam in ("", "_ef16", "_ef64"):
        # int8 codes rescored against the originals, below the full-scan threshold: every beam finds the exact top 10
        assert again[f"ann_recall@10{beam}"] == 1.0 and again[f"ann_p50_ms@10{beam}"] > 0


def test_a_load_cut_short_is_run_again_over_what_it_wrote(tmp_path):
    corpus = write_corpus(tmp_path)
    settings = Settings(data_dir=tmp_path / "data", vector={"embedder": "static-minilm"})
    run(settings, corpus, ["protein energy"], "static-minilm", batch=100, writes=1, documents_limit=100)
    (settings.data_dir / LOADED).unlink()  # as if the first run had been killed before its load finished
    again = run(settings, corpus, ["protein energy"], "static-minilm", batch=100, writes=1, documents_limit=240)
    assert "resumed" not in again and again["documents"] == 240 and again["vector_points"] == 240
