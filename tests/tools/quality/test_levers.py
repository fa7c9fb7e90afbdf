"""The lever harness and the tuning ranking on a tiny BEIR-layout collection written by the test."""

import json

import pytest

from hybridsearch.config.settings import Settings
from hybridsearch.fusion.methods import FusionMethod
from hybridsearch.tools.quality.levers import Dataset, Levers, variant
from hybridsearch.tools.quality.sweep import setup_from_settings
from hybridsearch.tools.quality.tune import to_markdown

DOCS = {
    "d1": ("Reciprocal rank fusion", "Fusion of ranked lists by summing reciprocal ranks with a constant k."),
    "d2": ("Cross-encoder reranking", "A cross-encoder scores each query and passage pair jointly."),
    "d3": ("Stemming", "The Porter stemmer strips suffixes so that index and indexing match."),
    "d4": ("Vector search", "Dense embeddings of passages are compared by cosine similarity."),
}
QUERIES = {"q1": "how does reciprocal rank fusion combine lists", "q2": "cosine similarity of dense embeddings"}
QRELS = {"q1": {"d1": 1}, "q2": {"d4": 1}}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("tiny")
    (tmp_path / "corpus.jsonl").write_text("".join(
        json.dumps({"_id": i, "title": t, "text": x}) + "\n" for i, (t, x) in DOCS.items()))
    (tmp_path / "queries.jsonl").write_text("".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t in QUERIES.items()))
    (tmp_path / "qrels").mkdir()
    (tmp_path / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(
        f"{q}\t{d}\t{s}\n" for q, r in QRELS.items() for d, s in r.items()))
    return Dataset.load(tmp_path)


@pytest.fixture(scope="module")
def levers(tiny, tmp_path_factory):
    return Levers(tiny, tmp_path_factory.mktemp("cache"))


@pytest.mark.parametrize("method", list(FusionMethod))
def test_every_fusion_method_finds_the_obvious_answers(levers, method):
    setup = variant(setup_from_settings(Settings()), fusion__method=method)
    scores = levers.evaluate(setup)
    assert scores["ndcg@10"] == pytest.approx(1.0)
    assert scores["mrr@10"] == pytest.approx(1.0)


def test_a_leg_with_no_matching_term_scores_zero(tiny, tmp_path):
    from dataclasses import replace

    unmatched = replace(tiny, queries={"q1": "zzzz qqqq"}, qrels={"q1": {"d1": 1}})
    levers = Levers(unmatched, tmp_path / "cache")
    assert levers.evaluate(variant(setup_from_settings(Settings()), legs=("bm25",), prf_docs=0))["ndcg@10"] == 0.0


def test_ranking_table_puts_the_default_row_in_view():
    table = {"collections": ["a"], "bars": {"a": 0.5},
             "candidates": [{"label": f"c{i}", "ndcg@10": {"a": 0.6 - i / 100}, "mean": 0.6 - i / 100,
                             "worst_margin": 0.1 - i / 100} for i in range(5)]
             + [{"label": "default (current settings)", "ndcg@10": {"a": 0.4}, "mean": 0.4, "worst_margin": -0.1}]}
    markdown = to_markdown(table, top=2)
    assert "| 1 | c0 |" in markdown and "| 6 | default (current settings) |" in markdown and "c3" not in markdown


def test_title_boost_adds_the_title_field_score_as_the_engines_do(tiny):
    from dataclasses import replace

    from hybridsearch.tools.quality.levers import Bm25Config, LexicalLeg

    # "stemming" is in d3's title only; "stemmer" in its text. The boost adds w x BM25(title).
    plain = LexicalLeg(tiny, Bm25Config(1.2, 0.75, "porter", "en_plus"))
    boosted = LexicalLeg(tiny, Bm25Config(1.2, 0.75, "porter", "en_plus", title_boost=0.5))
    (doc, base), = plain.search("stemming", 1)[0]
    (doc_b, with_title), = boosted.search("stemming", 1)[0]
    ids = [boosted.title_index.vocab_dict[t] for t in boosted.analyzer.analyze("stemming")]
    title_score = float(boosted.title_index.get_scores(ids).max())
    assert doc == doc_b == "d3" and title_score > 0
    assert with_title == pytest.approx(base + 0.5 * title_score)
    # A collection without titles has no title field: the boost changes nothing, and nothing fails.
    untitled = replace(tiny, titles=[""] * len(tiny.titles))
    leg = LexicalLeg(untitled, Bm25Config(1.2, 0.75, "porter", "en_plus", title_boost=0.5))
    assert leg.title_index is None
    assert leg.search("stemming", 1)[0] == LexicalLeg(untitled, Bm25Config(1.2, 0.75, "porter", "en_plus")).search("stemming", 1)[0]


def test_long_queries_can_be_fused_differently(levers):
    from hybridsearch.fusion.methods import FusionParams

    base = variant(setup_from_settings(Settings()), prf_docs=0, rocchio_docs=0)
    # Every query here has at least 5 words: switching all of them to RRF equals RRF outright.
    rrf = FusionParams(method=FusionMethod.RRF, rrf_k=20.0)
    switched = variant(base, long_query_words=5, long_fusion=rrf)
    assert levers.evaluate(switched) == levers.evaluate(variant(base, fusion=rrf))
    assert levers.evaluate(variant(base, long_query_words=100, long_fusion=rrf)) == levers.evaluate(base)


def test_a_variant_changes_the_leg_weights_it_names():
    base = setup_from_settings(Settings())
    changed = variant(base, fusion__leg_weights={"bm25": 0.4, "vector": 0.6}, fusion__rrf_k=20.0)
    assert changed.fusion.leg_weights == {**base.fusion.leg_weights, "bm25": 0.4, "vector": 0.6}
    assert changed.fusion.rrf_k == 20.0 and base.fusion.leg_weights["bm25"] == Settings().fusion.leg_weights["bm25"]
