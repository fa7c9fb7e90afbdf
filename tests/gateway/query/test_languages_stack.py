"""Languages through the gateway: a collection declared `language: de` (HYBRIDSEARCH_COLLECTIONS in the
stack's environment, tests/stacks.py) holding the German test collection (tests/data/german). Every test runs in both
topologies: expansion a process of its own (the shared stack: the chart's topology) and inside the gateway (one
machine's default, topology.in_gateway), where the same servicer detects, expands and caches in the gateway's process."""

from __future__ import annotations

import json

import grpc
import pytest
from german_corpus import german_documents
from stacks import gateway_client, running_stack, stack_env_on

from hybridsearch.v1 import common_pb2, search_pb2

pytestmark = pytest.mark.stack
GERMAN = "docs-de"
BM25 = common_pb2.RETRIEVAL_MODE_BM25


@pytest.fixture(scope="module", params=["apart", "inside"])
def searcher(request, tmp_path_factory):
    if request.param == "apart":
        yield request.getfixturevalue("gateway")
        return
    env = {**stack_env_on("2605", "2657", "2880"), "HYBRIDSEARCH_DATA_DIR": str(tmp_path_factory.mktemp("languages")),
           "HYBRIDSEARCH_TOPOLOGY__IN_GATEWAY": json.dumps(["fusion", "expansion"])}
    with running_stack(env) as running, gateway_client(running) as client:
        assert "expansion" not in running.parts
        yield client


@pytest.fixture(scope="module")
def german(searcher):
    docs = german_documents()
    assert searcher.index(GERMAN, docs).documents_received == len(docs)
    return docs


def search(client, query, **kwargs):
    return client.search(search_pb2.SearchRequest(query=query, collection=GERMAN, **kwargs))


def bm25_list(response) -> list[tuple[str, float]]:
    (original,) = [rl for rl in response.explain.leg_lists
                   if rl.leg == common_pb2.LEG_BM25 and rl.kind == common_pb2.QUERY_KIND_ORIGINAL]
    return [(h.doc_id, round(h.score, 4)) for h in original.hits]


def test_an_inflected_form_finds_the_document_with_another_form(searcher, german):
    # The document says "Häuser ... überflutet"; the query "überfluteten Häusern": German stems meet.
    response = search(searcher, "die überfluteten Häusern", mode=BM25, effort=common_pb2.EFFORT_FAST)
    assert response.hits[0].doc_id == "d01"
    response = search(searcher, "stirbt der Wald", mode=BM25, effort=common_pb2.EFFORT_FAST)
    assert response.hits[0].doc_id == "d07"  # Wälder


def test_german_stopwords_do_not_change_the_bm25_list(searcher, german):
    plain = search(searcher, "Haus", mode=BM25, effort=common_pb2.EFFORT_FAST, explain=True)
    framed = search(searcher, "das Haus und die der", mode=BM25, effort=common_pb2.EFFORT_FAST, explain=True)
    assert bm25_list(plain) == bm25_list(framed) and bm25_list(plain)


def test_the_expansion_answer_names_the_detected_language(searcher, german):
    response = search(searcher, "Wie wirkt Koffein auf den Schlaf", explain=True)
    e = response.explain
    assert (e.query_language, e.query_language_source) == ("de", "detected") and e.query_language_confidence >= 0.3
    assert response.hits[0].doc_id == "d02"
    # Asked again, a cached answer (no detection) names the language it was made in.
    again = search(searcher, "Wie wirkt Koffein auf den Schlaf", explain=True).explain
    assert again.expansion_cache_hit and (again.query_language, again.query_language_source,
                                          again.query_language_confidence) == (e.query_language, e.query_language_source,
                                                                               e.query_language_confidence)
    # Too short to tell: the collection's language.
    e = search(searcher, "BM25", explain=True).explain
    assert (e.query_language, e.query_language_source) == ("de", "collection")
    # The request's override.
    e = search(searcher, "Wie wirkt Koffein auf den Schlaf", explain=True, language="en").explain
    assert (e.query_language, e.query_language_source, e.query_language_confidence) == ("en", "request", 1.0)
    assert not e.expansion_cache_hit  # the override is in the key: not the detected answer's entry


def test_an_unsupported_language_is_invalid_argument(searcher, german):
    with pytest.raises(grpc.RpcError) as err:
        search(searcher, "Haus", language="klingon")
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "language 'klingon' is not supported" in err.value.details()


def test_german_feedback_over_a_collection_declared_english_carries_no_german_stopwords(searcher, german):
    # The same German documents in a collection nobody declared (English analysis): the query is detected German,
    # and its feedback variants leave out German stopwords as well as English ones.
    docs = german_documents()
    searcher.index("docs-de-undeclared", docs)
    response = searcher.search(search_pb2.SearchRequest(query="Wie wirkt Koffein auf den Schlaf", collection="docs-de-undeclared",
                                                       effort=common_pb2.EFFORT_BALANCED, expand=True, explain=True))
    e = response.explain
    assert e.query_language == "de" and e.expansion_generator.startswith("prf") and list(e.lexical_variants)
    added = {w.lower() for variant in e.lexical_variants for w in variant.split()} - {
        w.lower() for w in "Wie wirkt Koffein auf den Schlaf".split()}
    assert added and not added & {"die", "der", "das", "und", "sie", "auf", "den", "dem", "ist", "nicht", "mit"}, added
