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
word and at most MAX_FUZZY_WORDS unknown words per query. Measured on SciFact and CACM with typo'd
queries (docs/quality.md, "Typo tolerance"): these first values met the goal there and were left alone.

correct_query gives the same neighbours to legs that cannot match terms: each unknown word replaced by
its best one (the vector leg embeds that, via Bm25Service.Correct).

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


@dataclass(frozen=True)
class _Candidate:
    term: str  # the indexed stem
    weight: float
    doc_freq: int
    surface: str  # a word that analyzes to it: the corrected word, for correct_query


def _candidates(word: str, stem: str, analyze: Analyze, doc_freq: DocFreq, with_prefix: WithPrefix) -> list[_Candidate]:
    """An unknown word's nearest indexed terms, best first (fuzzy before prefix, then commonest), capped."""
    found: dict[str, _Candidate] = {}
    if len(word) >= MIN_FUZZY_CHARS:
        for variant in sorted(edits1(word)):
            s = (analyze(variant) or [""])[0]
            if s and s != stem and s not in found:
                df = doc_freq(s)
                if df > 0:
                    found[s] = _Candidate(s, FUZZY_WEIGHT, df, variant)
    if len(word) >= MIN_PREFIX_CHARS:
        for term, df in with_prefix(stem, MAX_EXPANSIONS + 1):
            if term != stem and df > 0 and term not in found:
                found[term] = _Candidate(term, PREFIX_WEIGHT, df, term)
    return sorted(found.values(), key=lambda c: (-c.weight, -c.doc_freq, c.term))[:MAX_EXPANSIONS]


def _unknown_words(query: str, analyze: Analyze, doc_freq: DocFreq):
    """(match, stems, unknown) per query word that is not a stopword; `unknown` for at most
    MAX_FUZZY_WORDS words whose single stem the index does not hold."""
    unknown = 0
    for match in WORD.finditer(query):
        stems = analyze(match.group().lower())
        if not stems:
            continue  # a stopword
        is_unknown = len(stems) == 1 and unknown < MAX_FUZZY_WORDS and doc_freq(stems[0]) == 0
        unknown += is_unknown
        yield match, stems, is_unknown


def expand_query(query: str, analyze: Analyze, doc_freq: DocFreq, with_prefix: WithPrefix) -> list[WeightedTerm]:
    """The weighted terms a query matches with typo tolerance: its known stems at EXACT_WEIGHT, and for
    each unknown word (the first MAX_FUZZY_WORDS) its nearest indexed terms, weighted lower."""
    out: list[WeightedTerm] = []
    for match, stems, unknown in _unknown_words(query, analyze, doc_freq):
        out += [WeightedTerm(stem, EXACT_WEIGHT) for stem in stems]
        if unknown:
            out += [WeightedTerm(c.term, c.weight) for c in
                    _candidates(match.group().lower(), stems[0], analyze, doc_freq, with_prefix)]
    return out


def correct_query(query: str, analyze: Analyze, doc_freq: DocFreq, with_prefix: WithPrefix) -> str:
    """The query with each unknown word replaced by its best indexed neighbour (the word one edit away
    whose stem is commonest, else the commonest completion): for a leg that cannot match terms, such as
    the vector leg's embedder. Words with no neighbour, and every known word, stay as they are."""
    out, last = [], 0
    for match, stems, unknown in _unknown_words(query, analyze, doc_freq):
        best = _candidates(match.group().lower(), stems[0], analyze, doc_freq, with_prefix)[:1] if unknown else []
        if best:
            out += [query[last:match.start()], best[0].surface]
            last = match.end()
    return "".join(out) + query[last:]


def exact_terms(tokens: list[str]) -> list[WeightedTerm]:
    """The analyzed query as weighted terms without typo tolerance (every term at EXACT_WEIGHT)."""
    return [WeightedTerm(t, EXACT_WEIGHT) for t in tokens]
