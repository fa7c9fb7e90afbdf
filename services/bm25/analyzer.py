"""English analysis matching Lucene's EnglishAnalyzer as Anserini configures it.

lowercase -> word tokens -> possessive 's removed -> Lucene's 33 English stopwords -> Porter stemmer.
On SciFact and ArguAna this reproduces Anserini's BM25-flat effectiveness (see README), and the
same chain is expressible as an OpenSearch custom analyzer (standard tokenizer, english_possessive,
lowercase, stop _english_, porter_stem).
"""

from __future__ import annotations

import re
from functools import lru_cache

import Stemmer
from bm25s.stopwords import STOPWORDS_EN_PLUS

LUCENE_ENGLISH_STOPWORDS = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the their then "
    "there these they this to was will with".split()
)
# en_plus: NLTK's English list as bm25s ships it (179 words); an OpenSearch stop filter takes it as is.
STOPWORD_LISTS = {"lucene": LUCENE_ENGLISH_STOPWORDS, "en_plus": frozenset(STOPWORDS_EN_PLUS), "none": frozenset()}
TOKEN = re.compile(r"\w+", re.UNICODE)
POSSESSIVE = re.compile(r"['’]s\b")
MAX_TOKEN_CHARS = 255


class EnglishAnalyzer:
    def __init__(self, stemmer: str = "porter", stopwords: str = "lucene") -> None:
        self._stemmer = Stemmer.Stemmer(stemmer)
        if stopwords not in STOPWORD_LISTS:
            raise ValueError(f"unknown stopword list {stopwords!r}: choose one of {', '.join(STOPWORD_LISTS)}")
        self._stop = STOPWORD_LISTS[stopwords]
        self.name = f"{stemmer}+{stopwords}-stopwords"

    @lru_cache(maxsize=200_000)
    def _stem(self, token: str) -> str:
        return self._stemmer.stemWord(token)

    def analyze(self, text: str) -> list[str]:
        text = POSSESSIVE.sub("", text.lower())
        stems = (self._stem(t) for t in TOKEN.findall(text) if t not in self._stop and len(t) <= MAX_TOKEN_CHARS)
        return [s for s in stems if s]  # Porter stems a lone "s" to nothing
