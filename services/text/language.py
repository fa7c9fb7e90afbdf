"""The language of a query or a document: lingua's detector over the languages this project can analyze.

Why lingua (lingua-language-detector, its n-gram models shipped in the wheel) and not py3langid: on
40 short queries (20 English, 20 German, 1-6 words) and 10 language-neutral names ("BM25", "Berlin",
"Kubernetes"; tests/data/languages), restricted to the languages below, at confidence 0.3 lingua put 35
right, 0 wrong, 5 below the floor and took 1 of the 10 names for a language; py3langid 0.4.0 put 35
right, 1 wrong and took 2 names, and it needs numpy >= 2, which this project's numpy < 2 pin (Triton's
python backend) rules out. A wrong language is the costly error (a German prompt for an English query),
a fallback to the collection's language the cheap one. lingua costs ~0.3 ms a query and ~370 MB once
loaded (3-5 s): it is loaded once per process, only where something is detected (the expansion service
at start; BM25 on the first document of a `language: auto` collection). docs/quality.md ("Languages")
has the commands and figures.

A detection below CONFIDENCE_FLOOR (short or ambiguous text: a name, an acronym, one word) is not
trusted: the collection's language answers instead (`CollectionConfig.language`, English for "auto").
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from enum import StrEnum

from hybridsearch.contract.errors import InvalidArgument

# Languages with both a Snowball stemmer (PyStemmer) and a packaged stopword list (bm25s): what the BM25
# analyzers, PRF and the detector know. ISO 639-1 codes.
SUPPORTED = ("en", "de", "fr", "es", "it", "nl", "pt", "da", "no", "sv", "ru", "tr")
AUTO = "auto"  # a collection whose documents each get their detected language (bm25/analyzer.py)
DEFAULT_LANGUAGE = "en"
# Measured on short queries (module docstring): at 0.3 no query was taken for a wrong language.
CONFIDENCE_FLOOR = 0.3
# Fewer letters than this say nothing reliable about a language.
MIN_LETTERS = 4


class Source(StrEnum):
    """Where a query's language came from (shown in ExpandResponse and explain)."""

    DETECTED = "detected"
    COLLECTION = "collection"  # the detection was below the floor, or the text too short
    REQUEST = "request"  # SearchRequest.language


@dataclass(frozen=True)
class Detection:
    language: str
    confidence: float
    source: Source

    @property
    def described(self) -> str:
        return f"{self.language} ({self.source}, confidence {self.confidence:.2f})"


class _Detector:
    """lingua's detector, built once per process on first use (3 s, ~370 MB)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._detector = None
        self._codes: dict = {}

    def _built(self):
        with self._lock:
            if self._detector is None:
                from lingua import IsoCode639_1, Language, LanguageDetectorBuilder

                # lingua names Norwegian Bokmål NB; the analyzers' "no" is Snowball's Norwegian.
                iso = {code: getattr(IsoCode639_1, "NB" if code == "no" else code.upper()) for code in SUPPORTED}
                languages = [Language.from_iso_code_639_1(i) for i in iso.values()]
                self._codes = {Language.from_iso_code_639_1(i): code for code, i in iso.items()}
                self._detector = LanguageDetectorBuilder.from_languages(*languages).with_preloaded_language_models().build()
            return self._detector

    def warm(self) -> None:
        self._built()

    def best(self, text: str) -> tuple[str, float]:
        values = self._built().compute_language_confidence_values(text)
        if not values:
            return DEFAULT_LANGUAGE, 0.0
        return self._codes[values[0].language], float(values[0].value)


DETECTOR = _Detector()


def fallback_language(collection_language: str) -> str:
    """What answers when detection cannot: the collection's language, English for an "auto" collection."""
    return DEFAULT_LANGUAGE if collection_language == AUTO else collection_language


def documents_language(collection_language: str, query: Detection) -> str:
    """The language a collection's documents are analyzed in, as far as a query can tell: the declared one,
    or the query's own in an "auto" collection (documents of every language)."""
    return query.language if collection_language == AUTO else collection_language


def detect(text: str, fallback: str, floor: float = CONFIDENCE_FLOOR) -> Detection:
    """The language of `text`, or `fallback` when the text is too short or the detection below `floor`."""
    if sum(ch.isalpha() for ch in text) < MIN_LETTERS:
        return Detection(fallback, 0.0, Source.COLLECTION)
    language, confidence = DETECTOR.best(text)
    if confidence < floor:
        return Detection(fallback, confidence, Source.COLLECTION)
    return Detection(language, confidence, Source.DETECTED)


def query_language(query: str, collection_language: str, requested: str = "") -> Detection:
    """A query's language: the request's override, else detected, else the collection's."""
    if requested:
        return Detection(check_language(requested), 1.0, Source.REQUEST)
    return detect(query, fallback_language(collection_language))


def check_language(value: str) -> str:
    """A request's language override: one of SUPPORTED (lower case), or INVALID_ARGUMENT."""
    code = value.strip().lower()
    if code not in SUPPORTED:
        raise InvalidArgument(f"language {value!r} is not supported: choose one of {', '.join(SUPPORTED)} (or leave it empty to detect)")
    return code


def check_collection_language(value: str) -> str:
    """A collection's declared language: one of SUPPORTED or "auto"."""
    code = value.strip().lower()
    if code != AUTO and code not in SUPPORTED:
        raise ValueError(f"language {value!r} is not supported: choose one of {', '.join(SUPPORTED)} or {AUTO}")
    return code
