"""The OpenSearch index a BM25 collection is: its analysis chain (the language's Snowball stemmer and stopwords,
as the embedded engines analyze), its BM25 similarity, its text fields and their boosts, its mappings."""

from __future__ import annotations

from typing import Any


from hybridsearch.bm25.analyzer import SNOWBALL, STOPWORD_LISTS
from hybridsearch.bm25.engine import field_name
from hybridsearch.security.acl import ALLOW, DENY
from hybridsearch.text.language import AUTO
from hybridsearch.storage.stores import (
    SPAN,
)

ANALYZER = "hybridsearch_english"
SIMILARITY = "hybridsearch_bm25"


def with_fields(body: dict[str, Any], fields: dict[str, float]) -> dict[str, Any]:
    """An index body with a text field per declared text field, analyzed and scored as `flat`."""
    if not fields:
        return body
    properties = body["mappings"]["properties"]
    extra = {field_name(key): dict(properties["flat"]) for key in sorted(fields)}
    return {**body, "mappings": {**body["mappings"], "properties": {**properties, **extra}}}


def stemmer_filter(stemmer: str) -> str | dict[str, str]:
    """The OpenSearch token filter for a PyStemmer algorithm name."""
    if stemmer == "porter":
        return "porter_stem"  # Lucene's PorterStemmer (see docs/opensearch.md for its three departures)
    if stemmer == "english":
        return {"type": "stemmer", "language": "porter2"}  # Snowball English, as PyStemmer's "english"
    return {"type": "snowball", "language": stemmer.capitalize()}


def analysis_chain(stemmer: str, stopwords: str, language: str) -> tuple[dict[str, Any], list[str]]:
    """(token filters, filter chain) of the embedded analyzer for `language` (bm25/analyzer.py).

    English: possessive, lowercase, the configured stopwords, the configured stemmer. Another language:
    lowercase, its stopword list, Lucene's Snowball stemmer of the same name (PyStemmer's algorithm): the
    embedded engine's terms, where OpenSearch's built-in language analyzers (`german`: light_german stemmer,
    german_normalization folding umlauts) would index other terms than the embedded engines."""
    if language == AUTO:
        raise ValueError("language 'auto' (per-document analysis) needs an embedded engine (embedded | bm25s); "
                         "declare the collection's language for OpenSearch")
    if language in SNOWBALL:
        stemmer, stop = SNOWBALL[language][0], frozenset(SNOWBALL[language][1])
        filters: dict[str, Any] = {}
        chain = ["lowercase"]
    else:
        if stopwords not in STOPWORD_LISTS:
            raise ValueError(f"unknown stopword list {stopwords!r}: choose one of {', '.join(STOPWORD_LISTS)}")
        stop = STOPWORD_LISTS[stopwords]
        filters = {"hybridsearch_possessive": {"type": "stemmer", "language": "possessive_english"}}
        chain = ["hybridsearch_possessive", "lowercase"]
    if stop:
        # An explicit list, never `_english_`: the embedded engine's list is the reference.
        filters["hybridsearch_stop"] = {"type": "stop", "stopwords": sorted(stop)}
        chain.append("hybridsearch_stop")
    stem = stemmer_filter(stemmer)
    if isinstance(stem, dict):
        filters["hybridsearch_stem"] = stem
        stem = "hybridsearch_stem"
    chain.append(stem)
    return filters, chain


SPAN_MAPPING = {"type": "integer", "index": False}  # a chunk's SourceSpan, stored only
# Fields added after indexes were first made: a new index has them, an older one gets them (put mapping) before
# its first write here. Readers (security/acl.py): allow and deny terms, and READERS_KEY, which names both so a
# write tells a new acl from the stored one in its version look-up.
READERS_KEY = "readers_key"
LATE_FIELDS: dict[str, Any] = {SPAN: SPAN_MAPPING, ALLOW: {"type": "keyword"}, DENY: {"type": "keyword"},
                               READERS_KEY: {"type": "keyword"}}


def index_body(*, k1: float, b: float, stemmer: str, stopwords: str, shards: int, replicas: int,
               language: str = "en") -> dict[str, Any]:
    """Settings and mapping of a collection's index: the embedded engine's analysis and BM25."""
    filters, chain = analysis_chain(stemmer, stopwords, language)
    text = {"type": "text", "analyzer": ANALYZER, "similarity": SIMILARITY}
    return {
        "settings": {
            "index": {
                "number_of_shards": shards,
                "number_of_replicas": replicas,
                "similarity": {SIMILARITY: {"type": "BM25", "k1": k1, "b": b}},
            },
            "analysis": {
                "filter": filters,
                "analyzer": {ANALYZER: {"type": "custom", "tokenizer": "standard", "filter": chain}},
            },
        },
        "mappings": {
            "dynamic": "strict",
            # Metadata values are exact-match strings (filters compare whole values), never analyzed.
            "dynamic_templates": [
                {"metadata_as_keywords": {"path_match": "meta.*", "match_mapping_type": "string",
                                          "mapping": {"type": "keyword"}}}
            ],
            "properties": {
                "flat": text,
                "title": text,
                "heading": {"type": "text", "index": False},
                "text": {"type": "text", "index": False},
                "doc_id": {"type": "keyword"},
                "position": {"type": "integer"},
                "content_hash": {"type": "keyword"},
                "write_id": {"type": "keyword"},
                # One chunk a document carries it: exact document counts and hash look-ups.
                "first_chunk": {"type": "boolean"},
                "meta": {"type": "object", "dynamic": True},
                **LATE_FIELDS,
            },
        },
    }
