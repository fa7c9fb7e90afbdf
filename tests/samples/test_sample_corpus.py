"""The sample corpus (samples/corpus, what `make run` indexes and the README's first queries read) states
the service's own figures: each claim below is read out of its file and held against the settings it
describes, so a retuned default that leaves the text behind fails here (reranking.md once said 20 CPU
candidates where the service reranks 10)."""

from __future__ import annotations

import re

import pytest

from hybridsearch.cli import SAMPLE_CORPUS
from hybridsearch.config.settings import Settings

S = Settings()
BANDS = dict(S.rerank.bands)


def percent(weight: float) -> int:
    return round(weight * 100)


def figure(value) -> float | str:
    """A figure as the text or the settings spell it: a number, else the word in lower case."""
    try:
        return float(value)
    except ValueError:
        return str(value).lower()


# file -> (a pattern with one group per figure, the figures the settings give, in order)
CLAIMS = [
    ("reranking.md", r"reranked: (\d+) candidates on a CPU, (\d+) or (\d+) on a GPU",
     [S.rerank.pool_cpu, S.rerank.pool_gpu_standard, S.rerank.pool_gpu_deep]),
    ("reranking.md", r"Ranks one to three keep (\d+)% fusion and (\d+)%\s+rerank, ranks four to ten (\d+)/(\d+), "
                     r"and lower ranks (\d+)/(\d+)",
     [percent(BANDS[3]), percent(1 - BANDS[3]), percent(BANDS[10]), percent(1 - BANDS[10]),
      percent(S.rerank.tail_fusion_weight), percent(1 - S.rerank.tail_fusion_weight)]),
    ("fusion.md", r"with k = (\d+)", [S.fusion.rrf_k]),
    ("fusion.md", r"variants weigh ([\d.]+),\s+and the list produced by a hypothetical answer passage \(HyDE\) "
                  r"weighs ([\d.]+).*?A bonus of ([\d.]+)",
     [S.fusion.variant_weight, S.fusion.hyde_weight, S.fusion.top_rank_bonus]),
    ("fusion.md", r"the fused score is ([\d.]+) x keyword \+ ([\d.]+) x\s+vector",
     [S.fusion.leg_weights["bm25"], S.fusion.leg_weights["vector"]]),
    ("bm25.md", r"this service keeps Lucene's k1 = ([\d.]+) and b = ([\d.]+)", [S.bm25.k1, S.bm25.b]),
    ("bm25.md", r"stemmed with the (\w+)\s+stemmer", [S.bm25.stemmer]),
    ("vectors.md", r"all-MiniLM-L6-v2, into (\d+)\s+dimensional", [384]),
]


@pytest.mark.parametrize(("name", "pattern", "expected"), CLAIMS, ids=[f"{c[0]}:{i}" for i, c in enumerate(CLAIMS)])
def test_the_sample_corpus_states_the_services_figures(name, pattern, expected):
    text = (SAMPLE_CORPUS / name).read_text()
    found = re.search(pattern, text, re.DOTALL)
    assert found, f"{name} no longer says {pattern!r}: keep the claim (or this table) in step"
    assert [figure(v) for v in found.groups()] == [figure(v) for v in expected]


def test_the_default_embedder_is_the_one_vectors_md_names():
    assert S.vector.embedder == "minilm-fp32"
