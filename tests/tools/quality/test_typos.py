"""The seeded typo generator (quality/typos.py): deterministic, one QWERTY-plausible edit per word hit."""

from __future__ import annotations

import random

import pytest

from hybridsearch.bm25.fuzzy import edits1
from hybridsearch.tools.quality.typos import (MIN_WORD_CHARS, NEIGHBOURS, delete, substitute, transpose, typo_queries,
                                        typo_query)

QUERIES = {"q1": "Vitamin deficiency increases homocysteine levels", "q2": "rare variants with larger effects",
           "q3": "is it so", "q4": "Hybrid search over BM25 and dense vectors"}


def test_same_seed_same_typos_other_seed_other_typos():
    assert typo_queries(QUERIES, 7) == typo_queries(QUERIES, 7)
    assert typo_queries(QUERIES, 7) != typo_queries(QUERIES, 8)
    # Each query's typos depend on the seed and its id only, not on the other queries or their order.
    assert typo_queries({"q2": QUERIES["q2"]}, 7)["q2"] == typo_queries(QUERIES, 7)["q2"]


def test_keyboard_neighbours():
    assert "f" in NEIGHBOURS["g"] and "h" in NEIGHBOURS["g"] and "t" in NEIGHBOURS["g"] and "b" in NEIGHBOURS["g"]
    assert "p" not in NEIGHBOURS["a"] and "m" not in NEIGHBOURS["q"]
    assert all(key not in near for key, near in NEIGHBOURS.items())


@pytest.mark.parametrize("edit", [substitute, delete, transpose])
def test_each_edit_is_one_typo_away(edit):
    rng = random.Random(3)
    for word in ["search", "vitamin", "Hybrid", "levels"]:
        out = edit(word, rng)
        assert out.lower() in edits1(word.lower())


def test_substitution_uses_a_neighbouring_key_and_keeps_case():
    rng = random.Random(1)
    for _ in range(50):
        out = substitute("Search", rng)
        i = next(i for i, (a, b) in enumerate(zip("Search", out)) if a != b)
        assert out[i].lower() in NEIGHBOURS["search"[i]]
        assert out[0].isupper()


def test_every_query_with_a_long_word_changes_and_short_words_stay():
    typod = typo_queries(QUERIES, 1)
    assert typod["q3"] == QUERIES["q3"]  # no word of MIN_WORD_CHARS letters
    for qid in ("q1", "q2", "q4"):
        assert typod[qid] != QUERIES[qid]
        clean, dirty = QUERIES[qid].split(), typod[qid].split()
        changed = [(a, b) for a, b in zip(clean, dirty) if a != b]
        assert all(len(a) >= MIN_WORD_CHARS and b.lower() in edits1(a.lower()) for a, b in changed)


def test_rate_sets_how_many_words_are_hit():
    long_query = " ".join(["keyboard"] * 200)
    few = sum(a != b for a, b in zip(long_query.split(), typo_query(long_query, random.Random(0), 0.1).split()))
    many = sum(a != b for a, b in zip(long_query.split(), typo_query(long_query, random.Random(0), 0.6).split()))
    assert 5 <= few < many and many >= 80
