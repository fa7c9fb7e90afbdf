"""Hashed terms through the real stack (issue 26; `sealed_terms: hashed`, security/hashed_terms.py): a sealed
collection whose BM25 index holds keyed hashes of its terms answers like a clear one (a unique word, a
stemmed variant of a word, filters, the tag leg, boosts, expansion and paging), says that typo tolerance is
unavailable when a request asks for it, and once the stack has stopped no file under the data dir (the BM25
term dictionary read back through tantivy included) and no Redis value holds its words. A sealed collection
with clear terms (the default), written alongside, keeps its words in its term dictionary: the same read
finds them there, so it can fail (a byte scan alone may not: the dictionary is an FST of shared prefixes)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from stacks import redis_at_rest
import tantivy
from test_sealed import DECLARED, Words, files_holding, sealed_stack, search, stored_records

from hybridsearch.bm25.analyzer import EnglishAnalyzer
from hybridsearch.client import GatewayClient
from hybridsearch.security.hashed_terms import TERM, TERM_HEX
from hybridsearch.security.sealing import Sealer
from hybridsearch.v1 import common_pb2, ingest_pb2, search_pb2

pytestmark = [pytest.mark.stack, pytest.mark.timeout(900)]

HASHED, CLEAR = "vault-hashed", "vault-clear"
HASHED_WORDS, CLEAR_WORDS = Words("hsh"), Words("clr")
BM25 = dict(effort=common_pb2.EFFORT_FAST, mode=common_pb2.RETRIEVAL_MODE_BM25)


def runner(words: Words) -> ingest_pb2.Document:
    """A document that says "runs" (never "running") beside a marker word."""
    return ingest_pb2.Document(id="runner", title="Night courier",
                               text=f"The courier runs the night route past the {words.body[0]} gate.")


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    declared = {HASHED: {**DECLARED, "sealed": True, "sealed_terms": "hashed"}, CLEAR: {"sealed": True}}
    with sealed_stack(tmp_path_factory.mktemp("sealed-terms"), ("2465", "2627", "2835"), declared,
                      (HASHED, CLEAR)) as running:
        yield running


@pytest.fixture(scope="module")
def client(stack):
    client = GatewayClient(stack.settings.endpoints.addr("gateway"))
    for collection, words in ((HASHED, HASHED_WORDS), (CLEAR, CLEAR_WORDS)):
        assert client.upsert(collection, [*words.documents(), runner(words)]).documents_written == 7
    yield client
    client.close()


def test_a_hashed_terms_collection_answers_like_a_clear_one(client):
    words = HASHED_WORDS
    word = words.body[1]  # in doc-0, doc-1, doc-3, doc-4
    lexical = search(client, HASHED, word, top_k=10, **BM25)
    assert sorted(h.doc_id for h in lexical.hits) == ["doc-0", "doc-1", "doc-3", "doc-4"]
    assert all(h.title.startswith(f"{words.title} memo number") and word in h.snippet for h in lexical.hits)
    # a stemmed variant: "running" and "runs" are both "run" before they are hashed
    assert [h.doc_id for h in search(client, HASHED, "running", **BM25).hits] == ["runner"]
    assert not search(client, HASHED, "the and of", **BM25).hits  # stopwords never reach the index
    owned = search(client, HASHED, word, filters=[common_pb2.MetadataFilter(field="owner", equals=f"{words.owner}1")],
                   **BM25)
    assert sorted(h.doc_id for h in owned.hits) == ["doc-1", "doc-3"]
    tagged = search(client, HASHED, f"{words.tag}-1", effort=common_pb2.EFFORT_FAST)
    assert {h.doc_id for h in tagged.hits if any(r.leg == common_pb2.LEG_TAG for r in h.legs)} == \
        {"doc-1", "doc-3", "doc-5"}
    boosted = search(client, HASHED, word, effort=common_pb2.EFFORT_FAST, explain=True)
    assert [b.doc_id for b in boosted.explain.boosts] == ["doc-4"]
    # BALANCED: expansion's probe matches hashed terms, its feedback variants are hashed by the BM25 leg
    first = search(client, HASHED, f"{word} harbour", top_k=2, explain=True)
    assert first.next_page_token and first.explain.lexical_variants
    assert [s.state for s in first.legs if s.name == "bm25"] == [search_pb2.LEG_STATE_OK] and not first.degraded
    second = search(client, HASHED, f"{word} harbour", top_k=2, page_token=first.next_page_token)
    assert second.hits and not {h.doc_id for h in first.hits} & {h.doc_id for h in second.hits}


def test_typo_tolerance_asked_of_a_hashed_terms_collection_is_a_notice(client):
    word = HASHED_WORDS.body[2]
    exact = search(client, HASHED, word, **BM25)
    asked = search(client, HASHED, word, fuzzy=True, **BM25)
    assert [h.doc_id for h in asked.hits] == [h.doc_id for h in exact.hits]
    assert any("typo tolerance" in n and "hashed-terms" in n for n in asked.notices)
    assert not any("typo tolerance" in n for n in exact.notices)
    assert not search(client, HASHED, word[:-1] + "x", fuzzy=True, **BM25).hits  # a typo matches nothing
    assert not any("typo tolerance" in n for n in search(client, CLEAR, word, fuzzy=True, **BM25).notices)


def test_a_rotated_hashed_terms_collection_keeps_only_hashes_under_its_new_key(stack, client):
    """`keys rotate` re-indexes the BM25 records it reseals: a hashed-terms collection's are sent as terms
    hashed under the new key, never as the words (the byte scan below reads the dictionary afterwards)."""
    before = Sealer(stack.settings).of(HASHED).keys.active
    rotate = subprocess.run([sys.executable, "-m", "hybridsearch.cli", "keys", "rotate", "-c", HASHED],
                            env=stack.test_env, capture_output=True, text=True, timeout=300)
    assert rotate.returncode == 0, rotate.stdout + rotate.stderr
    assert Sealer(stack.settings).of(HASHED).keys.active != before
    word = HASHED_WORDS.body[1]
    assert sorted(h.doc_id for h in search(client, HASHED, word, top_k=10, **BM25).hits) == \
        ["doc-0", "doc-1", "doc-3", "doc-4"]
    assert [h.doc_id for h in search(client, HASHED, "running", **BM25).hits] == ["runner"]


def test_no_word_of_a_hashed_terms_collection_is_at_rest(stack, client):
    """Runs last: saves Redis, stops the stack, reads every file under the data dir and the term dictionaries."""
    settings = stack.settings
    search(client, HASHED, f"{HASHED_WORDS.body[2]} harbour", top_k=2)  # an expansion entry and a kept order
    keys, values = redis_at_rest(settings)
    assert any(k.startswith(f"hybridsearch:expansion:{HASHED}:".encode()) for k in keys)
    seal = Sealer(settings).of(HASHED)
    stack.stop()
    root = settings.data_dir
    analyzer = EnglishAnalyzer(settings.bm25.stemmer, settings.bm25.stopwords)
    hashed = tantivy.Index.open(str(root / "bm25-tantivy" / HASHED)).searcher()
    clear = tantivy.Index.open(str(root / "bm25-tantivy" / CLEAR)).searcher()
    hashed_terms = {t for field in ("body", "title_terms") for t, _ in hashed.terms_with_prefix(field, "")}
    assert hashed_terms and all(len(t) == TERM_HEX for t in hashed_terms)
    assert analyzer.analyze("courier")[0] not in hashed_terms  # a common word too (the clear one holds it)
    for word in (*HASHED_WORDS.body, HASHED_WORDS.title):
        (stem,) = analyzer.analyze(word)
        assert stem not in hashed_terms and hashed.doc_freq("body", seal.digest(TERM, stem)[:TERM_HEX]) > 0, word
        assert files_holding(root, word) == set(), word
        assert stem.encode() not in values
    for marker in HASHED_WORDS.in_clear:  # titles, tags, metadata values too
        assert files_holding(root, marker) == set(), marker
        assert marker.encode() not in values and marker.encode() not in stored_records(root / "bm25-tantivy" / HASHED)
    # the clear-terms sealed collection beside it: the same read of its term dictionary finds its words
    clear_terms = {t for t, _ in clear.terms_with_prefix("body", "")}
    assert {analyzer.analyze(w)[0] for w in (*CLEAR_WORDS.body, "courier")} <= clear_terms
