"""Languages through the gateway: a collection declared `language: de` (HYBRIDSEARCH_COLLECTIONS in the
stack's environment, tests/stacks.py) holding the German test collection (tests/data/german)."""

from __future__ import annotations

import grpc
import pytest
from german_corpus import german_documents

from hybridsearch.v1 import common_pb2, search_pb2

pytestmark = pytest.mark.stack
GERMAN = "docs-de"
BM25 = common_pb2.RETRIEVAL_MODE_BM25


@pytest.fixture(scope="module")
def german(gateway):
    docs = german_documents()
    assert gateway.index(GERMAN, docs).documents_received == len(docs)
    return docs


def search(gateway, query, **kwargs):
    return gateway.search(search_pb2.SearchRequest(query=query, collection=GERMAN, **kwargs))


def bm25_list(response) -> list[tuple[str, float]]:
    (original,) = [rl for rl in response.explain.leg_lists
                   if rl.leg == common_pb2.LEG_BM25 and rl.kind == common_pb2.QUERY_KIND_ORIGINAL]
    return [(h.doc_id, round(h.score, 4)) for h in original.hits]


def test_an_inflected_form_finds_the_document_with_another_form(gateway, german):
    # The document says "Häuser ... überflutet"; the query "überfluteten Häusern": German stems meet.
    response = search(gateway, "die überfluteten Häusern", mode=BM25, effort=common_pb2.EFFORT_FAST)
    assert response.hits[0].doc_id == "d01"
    response = search(gateway, "stirbt der Wald", mode=BM25, effort=common_pb2.EFFORT_FAST)
    assert response.hits[0].doc_id == "d07"  # Wälder


def test_german_stopwords_do_not_change_the_bm25_list(gateway, german):
    plain = search(gateway, "Haus", mode=BM25, effort=common_pb2.EFFORT_FAST, explain=True)
    framed = search(gateway, "das Haus und die der", mode=BM25, effort=common_pb2.EFFORT_FAST, explain=True)
    assert bm25_list(plain) == bm25_list(framed) and bm25_list(plain)


def test_the_expansion_answer_names_the_detected_language(gateway, german):
    response = search(gateway, "Wie wirkt Koffein auf den Schlaf", explain=True)
    e = response.explain
    assert (e.query_language, e.query_language_source) == ("de", "detected") and e.query_language_confidence >= 0.3
    assert response.hits[0].doc_id == "d02"
    # Asked again, a cached answer (no detection) names the language it was made in.
    again = search(gateway, "Wie wirkt Koffein auf den Schlaf", explain=True).explain
    assert again.expansion_cache_hit and (again.query_language, again.query_language_source,
                                          again.query_language_confidence) == (e.query_language, e.query_language_source,
                                                                               e.query_language_confidence)
    # Too short to tell: the collection's language.
    e = search(gateway, "BM25", explain=True).explain
    assert (e.query_language, e.query_language_source) == ("de", "collection")
    # The request's override.
    e = search(gateway, "Wie wirkt Koffein auf den Schlaf", explain=True, language="en").explain
    assert (e.query_language, e.query_language_source, e.query_language_confidence) == ("en", "request", 1.0)
    assert not e.expansion_cache_hit  # the override is in the key: not the detected answer's entry


def test_an_unsupported_language_is_invalid_argument(gateway, german):
    with pytest.raises(grpc.RpcError) as err:
        search(gateway, "Haus", language="klingon")
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "language 'klingon' is not supported" in err.value.details()


def test_german_feedback_over_a_collection_declared_english_carries_no_german_stopwords(gateway, german):
    # The same German documents in a collection nobody declared (English analysis): the query is detected German,
    # and its feedback variants leave out German stopwords as well as English ones.
    docs = german_documents()
    gateway.index("docs-de-undeclared", docs)
    response = gateway.search(search_pb2.SearchRequest(query="Wie wirkt Koffein auf den Schlaf", collection="docs-de-undeclared",
                                                       effort=common_pb2.EFFORT_BALANCED, expand=True, explain=True))
    e = response.explain
    assert e.query_language == "de" and e.expansion_generator.startswith("prf") and list(e.lexical_variants)
    added = {w.lower() for variant in e.lexical_variants for w in variant.split()} - {
        w.lower() for w in "Wie wirkt Koffein auf den Schlaf".split()}
    assert added and not added & {"die", "der", "das", "und", "sie", "auf", "den", "dem", "ist", "nicht", "mit"}, added
