"""BM25 text analysis per language: English as Anserini configures Lucene, Snowball for the others.

English (every collection's default) is Lucene's EnglishAnalyzer as Anserini configures it:
lowercase -> word tokens -> possessive 's removed -> stopwords (Lucene's 33, or NLTK's list) -> Porter
stemmer. On SciFact and ArguAna this reproduces Anserini's BM25-flat effectiveness (see README), and the
same chain is expressible as an OpenSearch custom analyzer (standard tokenizer, english_possessive,
lowercase, stop, porter_stem).

Another language (`CollectionConfig.language`: de, fr, ...): lowercase -> word tokens -> the language's
stopwords (NLTK's lists as bm25s ships them) -> its Snowball stemmer (PyStemmer). OpenSearch gets the
same chain (opensearch.py: the explicit list and Lucene's Snowball filter).

`auto`: each document is analyzed in its own detected language (text/language.py, over the whole
document) and its terms carry that language as a prefix (`de:haus`, `en:hous`), all in the one body
field: a German and an English document never share a term, and each term's statistics are those of
its language's documents. A query is analyzed in every supported language and each analysis is
prefixed the same way, so it matches German documents through German stems and English ones through
English stems in one BM25 query; terms of a language with no documents match nothing.

Hashed terms (`sealed_terms: hashed`, security/hashed_terms.py): the gateway runs the collection's analysis
above and sends each term as a keyed hash, so the store's analysis of such a collection is the identity
(`HashedTermsAnalyzer`: whitespace-separated terms, no stopwords, no stemming) and its terms, statistics and
ranking are the clear mode's, under other names.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache

import Stemmer
from bm25s import stopwords as packaged

from hybridsearch.text.language import AUTO, DEFAULT_LANGUAGE, SUPPORTED, detect

LUCENE_ENGLISH_STOPWORDS = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the their then "
    "there these they this to was will with".split()
)
# en_plus: NLTK's English list as bm25s ships it (179 words); an OpenSearch stop filter takes it as is.
STOPWORD_LISTS = {"lucene": LUCENE_ENGLISH_STOPWORDS, "en_plus": frozenset(packaged.STOPWORDS_EN_PLUS), "none": frozenset()}
# Every other supported language: (PyStemmer's Snowball algorithm, NLTK's stopword list as bm25s ships it).
SNOWBALL = {
    "de": ("german", packaged.STOPWORDS_GERMAN),
    "fr": ("french", packaged.STOPWORDS_FRENCH),
    "es": ("spanish", packaged.STOPWORDS_SPANISH),
    "it": ("italian", packaged.STOPWORDS_ITALIAN),
    "nl": ("dutch", packaged.STOPWORDS_DUTCH),
    "pt": ("portuguese", packaged.STOPWORDS_PORTUGUESE),
    "da": ("danish", packaged.STOPWORDS_DANISH),
    "no": ("norwegian", packaged.STOPWORDS_NORWEGIAN),
    "sv": ("swedish", packaged.STOPWORDS_SWEDISH),
    "ru": ("russian", packaged.STOPWORDS_RUSSIAN),
    "tr": ("turkish", packaged.STOPWORDS_TURKISH),
}
TOKEN = re.compile(r"\w+", re.UNICODE)
POSSESSIVE = re.compile(r"['’]s\b")
MAX_TOKEN_CHARS = 255
PREFIX_SEPARATOR = ":"  # never inside a \w token, so a prefixed term cannot collide with a plain one


class Analyzer:
    """lowercase -> word tokens -> stopwords -> stemmer. The same analysis for documents and queries."""

    typo_tolerant = True  # whether fuzzy.py's edit-distance and prefix look-ups mean anything on its terms

    def __init__(self, stemmer: str, stop: frozenset[str], name: str, language: str) -> None:
        self._stemmer = Stemmer.Stemmer(stemmer)
        self._stop = stop
        self.name, self.language = name, language

    @property
    def stopwords(self) -> frozenset[str]:
        return self._stop

    @lru_cache(maxsize=200_000)
    def _stem(self, token: str) -> str:
        return self._stemmer.stemWord(token)

    def _normalized(self, text: str) -> str:
        return text.lower()

    def analyze(self, text: str) -> list[str]:
        stems = (self._stem(t) for t in TOKEN.findall(self._normalized(text))
                 if t not in self._stop and len(t) <= MAX_TOKEN_CHARS)
        return [s for s in stems if s]  # Porter stems a lone "s" to nothing

    def analyze_query(self, text: str) -> list[str]:
        return self.analyze(text)

    def for_document(self, text: str) -> Analyzer:
        """The analyzer of a document whose whole text is `text` (one language: this one)."""
        return self


class EnglishAnalyzer(Analyzer):
    def __init__(self, stemmer: str = "porter", stopwords: str = "lucene") -> None:
        if stopwords not in STOPWORD_LISTS:
            raise ValueError(f"unknown stopword list {stopwords!r}: choose one of {', '.join(STOPWORD_LISTS)}")
        super().__init__(stemmer, STOPWORD_LISTS[stopwords], f"{stemmer}+{stopwords}-stopwords", "en")

    def _normalized(self, text: str) -> str:
        return POSSESSIVE.sub("", text.lower())


def snowball_analyzer(language: str) -> Analyzer:
    stemmer, stop = SNOWBALL[language]
    return Analyzer(stemmer, frozenset(stop), f"{stemmer}+nltk-{language}-stopwords", language)


class _Prefixed(Analyzer):
    """One language's analysis with its terms prefixed by the language (an `auto` collection's document)."""

    def __init__(self, inner: Analyzer) -> None:  # super().__init__ not called: it wraps `inner`
        self.inner, self.language, self.name = inner, inner.language, inner.name
        self.prefix = inner.language + PREFIX_SEPARATOR

    @property
    def stopwords(self) -> frozenset[str]:
        return self.inner.stopwords

    def analyze(self, text: str) -> list[str]:
        return [self.prefix + t for t in self.inner.analyze(text)]


class MultilingualAnalyzer(Analyzer):
    """An `auto` collection: documents in their detected language, queries in all of them (module docstring)."""

    def __init__(self, by_language: dict[str, Analyzer]) -> None:  # super().__init__ not called
        self._prefixed = {code: _Prefixed(a) for code, a in by_language.items()}
        self.language, self.name = AUTO, "auto(" + ",".join(by_language) + ")"

    @property
    def stopwords(self) -> frozenset[str]:
        return frozenset().union(*(a.stopwords for a in self._prefixed.values()))

    def for_document(self, text: str) -> Analyzer:
        return self._prefixed[detect(text, DEFAULT_LANGUAGE).language]

    def analyze(self, text: str) -> list[str]:
        return self.for_document(text).analyze(text)

    def analyze_query(self, text: str) -> list[str]:
        return [t for a in self._prefixed.values() for t in a.analyze(text)]


class HashedTermsAnalyzer(Analyzer):
    """A hashed-terms collection in the store: its text is already analyzed and hashed (by the gateway), one
    term per whitespace-separated token, in order; nothing is removed or stemmed."""

    def __init__(self) -> None:  # super().__init__ not called: no stemmer, no stopwords
        self._stop, self.name, self.language = frozenset(), "hashed-terms", "hashed"

    def analyze(self, text: str) -> list[str]:
        return text.split()


HASHED_TERMS = HashedTermsAnalyzer()


class Analyzers:
    """The analyzer of each collection, from its declared language (English with the configured stemmer and
    stopwords unless `CollectionConfig.language` says otherwise: English collections analyze as before)."""

    def __init__(self, stemmer: str = "porter", stopwords: str = "lucene",
                 language_of: Callable[[str], str] | None = None,
                 hashed_of: Callable[[str], bool] | None = None) -> None:
        self.english = EnglishAnalyzer(stemmer, stopwords)
        self._language_of = language_of or (lambda _collection: DEFAULT_LANGUAGE)
        self._hashed_of = hashed_of or (lambda _collection: False)  # collection -> its terms come hashed
        self._by_language: dict[str, Analyzer] = {"en": self.english}

    def language(self, code: str) -> Analyzer:
        if code not in self._by_language:
            if code == AUTO:
                self._by_language[code] = MultilingualAnalyzer({c: self.language(c) for c in SUPPORTED})
            elif code in SNOWBALL:
                self._by_language[code] = snowball_analyzer(code)
            else:
                raise ValueError(f"no analyzer for language {code!r}: choose one of {', '.join(SUPPORTED)} or {AUTO}")
        return self._by_language[code]

    def declared(self, collection: str) -> str:
        """The collection's declared language (CollectionConfig.language; of its alias for a generation)."""
        return self._language_of(collection)

    def for_collection(self, collection: str, language: str | None = None) -> Analyzer:
        """What the store analyzes a collection's text with: `language`'s analysis (the collection's recorded
        language, CreateCollection), else its declared language's, or the identity for a hashed-terms
        collection whatever its language (the gateway analyzed and hashed it)."""
        if self._hashed_of(collection):
            return HASHED_TERMS
        return self.language(language or self._language_of(collection))
