"""Typo tolerance's term expansion (bm25/fuzzy.py) on a small vocabulary, with the real analyzer."""

from __future__ import annotations

import pytest

from hybridsearch.bm25 import fuzzy
from hybridsearch.bm25.analyzer import EnglishAnalyzer
from hybridsearch.bm25.fuzzy import EXACT_WEIGHT, FUZZY_WEIGHT, PREFIX_WEIGHT, WeightedTerm, edits1, expand_query

ANALYZER = EnglishAnalyzer("porter", "en_plus")


def vocabulary(words: dict[str, int]):
    """doc_freq and with_prefix over analyzed words -> document frequency, as an engine gives them."""
    df = {ANALYZER.analyze(w)[0]: n for w, n in words.items()}

    def with_prefix(prefix: str, limit: int):
        return sorted(((t, n) for t, n in df.items() if t.startswith(prefix)), key=lambda tn: (-tn[1], tn[0]))[:limit]

    return (lambda term: df.get(term, 0)), with_prefix


def expand(query: str, words: dict[str, int]) -> list[WeightedTerm]:
    doc_freq, with_prefix = vocabulary(words)
    return expand_query(query, ANALYZER.analyze, doc_freq, with_prefix)


def test_edits1_makes_every_single_typo_and_nothing_else():
    variants = edits1("cat")
    assert {"at", "ct", "ca", "act", "cta", "bat", "cart", "cats"} <= variants
    assert "cat" not in variants and "dog" not in variants
    assert len(variants) == len(set(variants))
    assert all(abs(len(v) - 3) <= 1 for v in variants)


def test_a_known_word_matches_exactly_and_nothing_else():
    assert expand("protein folding", {"protein": 5, "proteins": 3, "folding": 2, "fold": 9}) == [
        WeightedTerm("protein", EXACT_WEIGHT), WeightedTerm("fold", EXACT_WEIGHT)]


@pytest.mark.parametrize("typo,intended", [("protien", "protein"), ("protin", "protein"), ("proteinn", "protein"),
                                           ("prptein", "protein"), ("runing", "running")])
def test_an_unknown_word_matches_its_indexed_neighbours_below_exact(typo, intended):
    terms = expand(typo, {intended: 5, "unrelated": 50})
    stem = ANALYZER.analyze(intended)[0]
    assert WeightedTerm(stem, FUZZY_WEIGHT) in terms
    assert FUZZY_WEIGHT < EXACT_WEIGHT and PREFIX_WEIGHT < EXACT_WEIGHT
    assert all(t.term != "unrel" for t in terms)


def test_a_word_cut_short_matches_by_prefix():
    terms = expand("algori", {"algorithm": 4, "allergy": 9})
    assert terms == [WeightedTerm("algori", EXACT_WEIGHT), WeightedTerm("algorithm", PREFIX_WEIGHT)]


def test_short_words_are_never_fuzzed():
    short = "x" * (fuzzy.MIN_FUZZY_CHARS - 1)
    assert [t.term for t in expand("celk", {"cell": 10, "milk": 10, "elk": 10})] == ["celk"]
    assert [t.term for t in expand(short, {short + "y": 3})] == [short]


def test_expansions_are_capped_and_the_commonest_win():
    neighbours = {w: n for n, w in enumerate(["blast", "blash", "bleat", "bloat", "boast", "beast", "least"], 1)}
    terms = expand("bleast", neighbours)
    fuzzed = [t for t in terms if t.weight < EXACT_WEIGHT]
    assert len(fuzzed) == fuzzy.MAX_EXPANSIONS
    assert [t.term for t in fuzzed] == ["least", "beast", "bleat"][: fuzzy.MAX_EXPANSIONS]


def test_at_most_max_fuzzy_words_are_expanded_per_query():
    words = [f"zzqword{chr(97 + i % 26)}{chr(97 + i // 26)}" for i in range(fuzzy.MAX_FUZZY_WORDS + 5)]
    calls = []
    doc_freq = lambda term: calls.append(term) or 0  # noqa: E731 - counts look-ups
    expand_query(" ".join(words), ANALYZER.analyze, doc_freq, lambda prefix, n: [])
    looked_up_variants = len(calls) - len(words)
    per_word = len(edits1(words[0]))
    assert looked_up_variants <= fuzzy.MAX_FUZZY_WORDS * per_word


def test_stopwords_and_empty_queries_expand_to_nothing():
    assert expand("the of and", {"thesis": 4}) == []
    assert expand("", {"x": 1}) == []


def test_correct_query_replaces_unknown_words_by_their_best_neighbour_and_keeps_the_rest():
    doc_freq, with_prefix = vocabulary({"protein": 5, "protean": 1, "folding": 3, "algorithm": 2, "Cells": 4})
    correct = lambda q: fuzzy.correct_query(q, ANALYZER.analyze, doc_freq, with_prefix)  # noqa: E731
    assert correct("Protien folding in Cells!") == "protein folding in Cells!"
    assert correct("fast algori") == "fast algorithm"  # a completion where no word is one edit away
    assert correct("zzzzzz folding") == "zzzzzz folding"  # no neighbour: as typed
    assert correct("the folding") == "the folding"
