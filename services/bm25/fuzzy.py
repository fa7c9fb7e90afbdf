"""Typo tolerance for the embedded BM25 engines (tantivy and bm25s): which indexed terms a query matches.

A query word the index knows is matched exactly, as without typo tolerance: a clean query scores as
before. A word whose stem the index does not hold is replaced by indexed terms near it:
  - fuzzy: the stems of the words one edit away (a deletion, an insertion, a substitution or a
    transposition of neighbours: the Damerau-Levenshtein distance 1 a single typo makes), generated in
    surface form and analyzed, so "protien" finds "protein" and "runing" finds "run";
  - prefix: indexed stems that begin with the word's stem ("hybri" finds "hybrid", "hybridis").
The candidates are ranked by document frequency (the commonest neighbour is the likeliest intended
word) and weighted below an exact match (FUZZY_WEIGHT, PREFIX_WEIGHT < 1).

Bounds, so that a short word cannot explode into thousands of terms: no fuzzy matching under
MIN_FUZZY_CHARS letters, no prefix matching under MIN_PREFIX_CHARS, at most MAX_EXPANSIONS terms per
word and at most MAX_FUZZY_WORDS unknown words per query. The constants were tuned on SciFact and CACM
with typo'd queries (docs/quality.md, "Typo tolerance").

The engines give three look-ups: the analyzer, a term's document frequency, and the indexed terms
with a prefix (the most frequent first). OpenSearch does the same with its own `fuzziness` options
(opensearch.py), where Lucene enumerates the terms.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

MIN_FUZZY_CHARS = 5
MIN_PREFIX_CHARS = 5
MAX_EXPANSIONS = 3
MAX_FUZZY_WORDS = 16
FUZZY_WEIGHT = 0.6
PREFIX_WEIGHT = 0.4
EXACT_WEIGHT = 1.0
LETTERS = "abcdefghijklmnopqrstuvwxyz"
WORD = re.compile(r"\w+", re.UNICODE)

Analyze = Callable[[str], list[str]]
DocFreq = Callable[[str], int]
WithPrefix = Callable[[str, int], list[tuple[str, int]]]  # (prefix, limit) -> [(term, doc freq)], commonest first


@dataclass(frozen=True)
class WeightedTerm:
    term: str
    weight: float


def edits1(word: str) -> set[str]:
    """Every string one deletion, transposition, substitution or insertion (a-z) away from `word`."""
    splits = [(word[:i], word[i:]) for i in range(len(word) + 1)]
    deletes = {a + b[1:] for a, b in splits if b}
    transposes = {a + b[1] + b[0] + b[2:] for a, b in splits if len(b) > 1}
    replaces = {a + c + b[1:] for a, b in splits if b for c in LETTERS}
    inserts = {a + c + b for a, b in splits for c in LETTERS}
    return (deletes | transposes | replaces | inserts) - {word}


def _candidates(word: str, stem: str, analyze: Analyze, doc_freq: DocFreq, with_prefix: WithPrefix) -> list[WeightedTerm]:
    found: dict[str, tuple[float, int]] = {}  # term -> (weight, doc freq)
    if len(word) >= MIN_FUZZY_CHARS:
        stems = {s for variant in edits1(word) for s in analyze(variant)[:1]} - {stem}
        for s in stems:
            df = doc_freq(s)
            if df > 0:
                found[s] = (FUZZY_WEIGHT, df)
    if len(word) >= MIN_PREFIX_CHARS:
        for term, df in with_prefix(stem, MAX_EXPANSIONS + 1):
            if term != stem and df > 0 and term not in found:
                found[term] = (PREFIX_WEIGHT, df)
    ranked = sorted(found.items(), key=lambda kv: (-kv[1][0], -kv[1][1], kv[0]))
    return [WeightedTerm(term, weight) for term, (weight, _) in ranked[:MAX_EXPANSIONS]]


def expand_query(query: str, analyze: Analyze, doc_freq: DocFreq, with_prefix: WithPrefix) -> list[WeightedTerm]:
    """The weighted terms a query matches with typo tolerance: its known stems at EXACT_WEIGHT, and for
    each unknown word (the first MAX_FUZZY_WORDS) its nearest indexed terms, weighted lower."""
    out: list[WeightedTerm] = []
    unknown = 0
    for word in WORD.findall(query.lower()):
        stems = analyze(word)
        if not stems:
            continue  # a stopword
        for stem in stems:
            out.append(WeightedTerm(stem, EXACT_WEIGHT))
        stem = stems[0]
        if len(stems) == 1 and doc_freq(stem) == 0 and unknown < MAX_FUZZY_WORDS:
            unknown += 1
            out += _candidates(word, stem, analyze, doc_freq, with_prefix)
    return out


def exact_terms(tokens: list[str]) -> list[WeightedTerm]:
    """The analyzed query as weighted terms without typo tolerance (every term at EXACT_WEIGHT)."""
    return [WeightedTerm(t, EXACT_WEIGHT) for t in tokens]
