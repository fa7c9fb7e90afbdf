"""Expansion without an LLM: pseudo-relevance feedback over the top BM25 hits (RM3-style).

Terms are weighted by sum over feedback documents of P(term|doc) x normalised document score;
query terms and stopwords are excluded: the stopwords of the query's language (the analyzer's
language: English takes words of letters (any script) and its lists, any other language words of any
alphabet (digits within allowed) and its own stopword list, so German feedback never proposes "und" or
"über"). The lexical variant is the query plus the best terms (as their most frequent surface form, so the BM25 analyzer stems them again to the same stem); the
semantic variant is the query stripped of question framing plus the three best terms.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict

from hybridsearch.bm25.analyzer import LUCENE_ENGLISH_STOPWORDS, Analyzer

# A word: letters of any script and hyphens, 3+ characters ([^\W\d_] is a Unicode letter), so an
# English text's "über" or "naïve" is one word, never the fragment "ber".
WORD = re.compile(r"[^\W\d_](?:[^\W\d_]|-){2,}")
QUESTION_FRAME = re.compile(
    r"^\s*(what|which|who|whom|whose|when|where|why|how)\b(\s+(is|are|was|were|do|does|did|can|could|should|to|much|many))*\s+",
    re.IGNORECASE,
)
EXTRA_STOP = frozenset(
    "also been from have has had which were more than other after before between about while into "
    "over under these those whose there where when what only such both each very most some".split()
)
# A word of any alphabet (letters first, 3+ characters): what feedback reads in other languages.
ANY_WORD = re.compile(r"[^\W\d_][\w-]{2,}")
# language -> (what a word is, which words never become feedback terms); others: ANY_WORD and their list.
FEEDBACK_WORDS = {"en": (WORD, LUCENE_ENGLISH_STOPWORDS | EXTRA_STOP)}


def feedback_words(analyzer: Analyzer) -> tuple[re.Pattern, frozenset[str]]:
    return FEEDBACK_WORDS.get(analyzer.language, (ANY_WORD, analyzer.stopwords))


def feedback_terms(query: str, docs: list[tuple[str, float]], analyzer: Analyzer, n_terms: int,
                   also_stop: frozenset[str] = frozenset()) -> list[str]:
    """Best expansion words (surface forms) from (text, bm25 score) feedback documents; `also_stop`: the
    stopwords of the query's own language when the documents are analyzed in another (a German query over a
    collection declared English finds German documents: their "die" and "und" are no feedback terms)."""
    if not docs or n_terms <= 0:
        return []
    query_stems = set(analyzer.analyze(query))
    word, stop = feedback_words(analyzer)
    stop = stop | also_stop
    top = max(score for _, score in docs) or 1.0
    weights: dict[str, float] = defaultdict(float)
    surface: dict[str, Counter] = defaultdict(Counter)
    for text, score in docs:
        words = [w for w in (w.lower() for w in word.findall(text)) if w not in stop]
        if not words:
            continue
        stems = [analyzer.analyze(w) for w in words]
        counts: Counter = Counter()
        for w, s in zip(words, stems):
            if s and s[0] not in query_stems:
                counts[s[0]] += 1
                surface[s[0]][w] += 1
        for stem, c in counts.items():
            weights[stem] += (c / len(words)) * (score / top)
    best = sorted(weights.items(), key=lambda kv: (-kv[1], kv[0]))[:n_terms]
    return [surface[stem].most_common(1)[0][0] for stem, _ in best]


def prf_variants(query: str, terms: list[str]) -> tuple[list[str], list[str]]:
    """(lexical variants, semantic variants) built from feedback terms."""
    if not terms:
        return [], []
    lexical = [f"{query} {' '.join(terms)}"]
    core = QUESTION_FRAME.sub("", query).rstrip("?").strip() or query
    semantic = [f"{core} {' '.join(terms[:3])}"]
    return lexical, semantic
