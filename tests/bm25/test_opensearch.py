"""The OpenSearch adapter against a real server process: noida-db (PyPI), which answers the
Elasticsearch 8.15 REST API with Lucene's BM25 and analysis chain, started on a loopback port.

The embedded engine is the reference: same corpus, same settings, same scores (once the server's
(k1 + 1) factor is divided out, see OpenSearchBm25Engine.score_scale). Where Lucene's analysis
differs from the embedded analyzer, the test pins the difference (docs/opensearch.md).
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
import uuid

import grpc
import pytest

from noida import noida_server
from stacks import PORT_SHIFT

from hybridsearch.bm25.analyzer import STOPWORD_LISTS, EnglishAnalyzer
from hybridsearch.bm25.embedded import EmbeddedBm25Engine
from hybridsearch.bm25.opensearch_index import ANALYZER
from hybridsearch.bm25.opensearch import OpenSearchBm25Engine
from hybridsearch.bm25.opensearch_search import check_search_response
from hybridsearch.bm25.service import Bm25Servicer
from hybridsearch.storage.stores import EngineUnavailable
from hybridsearch.text.chunking import content_hash
from hybridsearch.v1 import bm25_pb2_grpc, common_pb2

# `hybridsearch bench` runs use 59200 (docs/opensearch.md); worktrees testing at once shift the port.
NOIDA_PORT = 29201 + PORT_SHIFT
UNUSED_PORT = 29209
URL = f"http://127.0.0.1:{NOIDA_PORT}"


@pytest.fixture(scope="module")
def noida(tmp_path_factory):
    with noida_server(NOIDA_PORT, tmp_path_factory.mktemp("noida")) as proc:
        yield proc


@pytest.fixture
async def engines(noida, tmp_path):
    """A factory of (opensearch, embedded) engine pairs with the same settings; each pair its own indexes."""
    made = []

    def make(**settings):
        prefix = f"t{uuid.uuid4().hex[:10]}-"
        remote = OpenSearchBm25Engine(URL, index_prefix=prefix, replicas=0, **settings)
        local = EmbeddedBm25Engine(tmp_path / prefix, settings.get("k1", 1.2), settings.get("b", 0.75),
                                   settings.get("stemmer", "porter"), settings.get("stopwords", "en_plus"),
                                   settings.get("title_boost", 0.0))
        made.append((remote, local))
        return remote, local

    yield make
    for remote, local in made:
        # Elasticsearch 8 refuses wildcard deletes (action.destructive_requires_name): name each index.
        names = list(await remote.client.indices.get(index=f"{remote.index_prefix}*"))
        if names:
            await remote.client.indices.delete(index=",".join(names))
        await remote.close()
        await local.close()


def chunk(doc_id, text, title="", n=0, meta=None, doc_hash=None):
    meta = meta or {}
    return common_pb2.Chunk(chunk_id=f"{doc_id}#{n}", doc_id=doc_id, position=n, title=title, text=text,
                            metadata=meta, content_hash=doc_hash or content_hash(title, text, meta))


def document(doc_id, texts, title="", meta=None):
    """Chunks of one document: one content hash for all of them, as the ingest path writes it."""
    doc_hash = content_hash(title, "\n".join(texts), meta or {})
    return [chunk(doc_id, t, title, n, meta, doc_hash) for n, t in enumerate(texts)]


# Short chunks (Lucene keeps field lengths up to 40 tokens exactly, longer ones in one lossy byte),
# words free of the analysis differences pinned in test_analysis_matches_the_embedded_analyzer.
CORPUS = [
    *document("protein", ["Protein folding happens in cells, guided by chaperones.",
                          "Misfolded proteins aggregate; chaperones refold them."], title="Protein folding"),
    *document("galaxy", ["Galaxies form when gas clouds collapse under gravity."], title="Galaxy formation"),
    *document("binding", ["Protein protein interactions: binding sites and binding energy.",
                          "Antibodies bind antigens with high affinity."], title="Molecular binding"),
    *document("stars", ["Stars burn hydrogen; massive stars burn faster and collapse."], title="Stellar life"),
    *document("cells", ["The cell membrane controls what enters the cell."], title="Cell membranes"),
    *document("syntax", ["foo bar baz: a title about foo, and bar in brackets."], title="foo"),
]
QUERIES = ["protein binding", "stars collapse", "cell", "chaperones refold misfolded proteins",
           "gravity and the formation of galaxies", "foo AND (bar OR \""]


async def both(remote, local, collection, queries, limit=10, filters=()):
    got = await remote.search(collection, queries, limit, list(filters))
    want = await local.search(collection, queries, limit, list(filters))
    return got, want


def assert_same_ranking(got, want):
    for g, w in zip(got, want, strict=True):
        assert {h.chunk_id: pytest.approx(h.score, rel=1e-5) for h in w} == {h.chunk_id: h.score for h in g}
        assert [h.rank for h in g] == list(range(1, len(g) + 1))
        scores = [h.score for h in g]
        assert scores == sorted(scores, reverse=True)
        # Order must agree wherever scores are not tied (ties: insertion order vs Lucene doc id).
        for a, b in zip(g, g[1:]):
            if a.score > b.score * (1 + 1e-5):
                assert [h.chunk_id for h in w].index(a.chunk_id) < [h.chunk_id for h in w].index(b.chunk_id)


# noida-db 0.2.3 scores every text field with BM25 k1 1.2, b 0.75 whatever `index.similarity` says
# (even type "boolean"): other k1/b are checked against the index settings only, and are expected to
# fail here until noida honours them (strict: an XPASS means it does, and docs/opensearch.md is stale).
NOIDA_IGNORES_SIMILARITY = pytest.mark.xfail(strict=True, reason="noida-db ignores index.similarity (k1/b)")


@pytest.mark.parametrize("settings", [
    {},  # the defaults: k1 1.2, b 0.75, 179 stopwords
    {"stopwords": "lucene"},
    {"stopwords": "none"},
    {"title_boost": 2.0},
    pytest.param({"k1": 0.9, "b": 0.4, "stopwords": "lucene"}, marks=NOIDA_IGNORES_SIMILARITY),
])
async def test_scores_and_order_equal_the_embedded_engine(engines, settings):
    remote, local = engines(**settings)
    for engine in (remote, local):
        await engine.upsert("c", CORPUS)
    got, want = await both(remote, local, "c", QUERIES)
    assert all(got[:5]) and sum(len(g) for g in got) > 10
    assert_same_ranking(got, want)
    assert got[0][0].title and got[0][0].text and got[0][0].doc_id


async def test_index_settings_carry_the_embedded_configuration(engines):
    remote, _ = engines(k1=0.9, b=0.4, stopwords="en_plus", title_boost=1.5)
    await remote.upsert("c", CORPUS[:1])
    index = remote.index("c")
    settings = (await remote.client.indices.get_settings(index=index))[index]["settings"]["index"]
    assert settings["similarity"]["hybridsearch_bm25"] == {"type": "BM25", "k1": "0.9", "b": "0.4"}
    analysis = settings["analysis"]
    assert analysis["analyzer"][ANALYZER]["tokenizer"] == "standard"
    assert analysis["filter"]["hybridsearch_stop"]["stopwords"] == sorted(STOPWORD_LISTS["en_plus"])
    assert len(analysis["filter"]["hybridsearch_stop"]["stopwords"]) == 179
    mapping = (await remote.client.indices.get_mapping(index=index))[index]["mappings"]["properties"]
    assert mapping["flat"]["similarity"] == mapping["title"]["similarity"] == "hybridsearch_bm25"
    assert mapping["doc_id"]["type"] == "keyword"


async def analyze(remote, collection, text):
    index = remote.index(collection)
    response = await remote.client.indices.analyze(index=index, body={"analyzer": ANALYZER, "text": text})
    return [t["token"] for t in response["tokens"]]


async def test_analysis_matches_the_embedded_analyzer(engines):
    """Same tokens on ordinary prose; the known differences are pinned (docs/opensearch.md)."""
    remote, _ = engines()
    await remote.upsert("c", CORPUS[:1])
    embedded = EnglishAnalyzer("porter", "en_plus")
    prose = ("The patient's T cells were Activated, and their responses weren't measured by the "
             "researchers' assays; IL-6 levels rose in mice treated with dexamethasone")
    assert await analyze(remote, "c", prose) == embedded.analyze(prose)
    # Lucene's PorterStemmer departs from Porter's published algorithm (logi->log, bli->ble) and
    # leaves words of 1-2 letters alone; PyStemmer follows the paper.
    assert await analyze(remote, "c", "epidemiology assembly bs") == ["epidemiolog", "assembl", "bs"]
    assert embedded.analyze("epidemiology assembly bs") == ["epidemiologi", "assembli", "b"]
    # The standard tokenizer (UAX#29) keeps decimals, inner apostrophes and a colon between letters
    # (MidLetter) inside one token; `\w+` splits them.
    assert await analyze(remote, "c", "3.5 o'neill title:foo") == ["3.5", "o'neil", "title:foo"]
    assert embedded.analyze("3.5 o'neill title:foo") == ["3", "5", "neill", "titl", "foo"]  # "o": a stopword


async def test_filters_match_the_embedded_semantics(engines):
    remote, local = engines()
    docs = [*document("en1", ["shared words here"], meta={"lang": "en", "kind": "a"}),
            *document("en2", ["shared words again"], meta={"lang": "en", "kind": "b"}),
            *document("de1", ["shared words auf deutsch"], meta={"lang": "de"}),
            *document("none", ["shared words without metadata"])]
    for engine in (remote, local):
        await engine.upsert("c", docs)
    cases = {
        "equals": ([common_pb2.MetadataFilter(field="lang", equals="en")], {"en1", "en2"}),
        "any_of": ([common_pb2.MetadataFilter(field="lang", any_of=common_pb2.StringList(values=["de", "fr"]))],
                   {"de1"}),
        "not_equals": ([common_pb2.MetadataFilter(field="lang", not_equals="en")], {"de1", "none"}),
        "both": ([common_pb2.MetadataFilter(field="lang", equals="en"),
                  common_pb2.MetadataFilter(field="kind", not_equals="a")], {"en2"}),
    }
    for name, (filters, expected) in cases.items():
        got, want = await both(remote, local, "c", ["shared words"], filters=filters)
        assert {h.doc_id for h in got[0]} == expected, name
        assert_same_ranking(got, want)
    # Hits bring back the metadata fields asked for (a collection's boosts), as the embedded engine's do.
    (remote_hits,), (local_hits,) = [await e.search("c", ["shared words"], 10, [], ("kind",)) for e in (remote, local)]
    assert {h.doc_id: dict(h.metadata) for h in remote_hits} == {h.doc_id: dict(h.metadata) for h in local_hits}
    assert {h.doc_id: h.metadata.get("kind") for h in remote_hits} == {"en1": "a", "en2": "b", "de1": None, "none": None}


async def test_reupsert_is_idempotent_and_a_shrunk_document_loses_its_old_chunks(engines):
    remote, _ = engines()
    first = await remote.upsert("c", CORPUS)
    assert (first.documents_written, first.documents_unchanged, first.chunks_written) == (6, 0, len(CORPUS))
    again = await remote.upsert("c", CORPUS)
    assert (again.documents_written, again.documents_unchanged, again.chunks_written) == (0, 6, 0)
    stats = await remote.stats("c")
    assert (stats.engine, stats.documents, stats.chunks) == ("opensearch-bm25", 6, len(CORPUS))
    assert stats.details["score_scale"] == f"{1 / 2.2:.6g}"  # noida answers as Elasticsearch 8

    shrunk = document("protein", ["Only one chunk is left, about ribosomes."], title="Protein folding")
    result = await remote.upsert("c", shrunk)
    assert (result.documents_written, result.chunks_written) == (1, 1)
    assert (await remote.stats("c")).chunks == len(CORPUS) - 1
    (hits,) = await remote.search("c", ["chaperones"], 10, [])
    assert hits == []
    (hits,) = await remote.search("c", ["ribosomes"], 10, [])
    assert [h.chunk_id for h in hits] == ["protein#0"]
    hashes = await remote.content_hashes("c", ["protein", "galaxy", "missing"])
    assert hashes == {"protein": shrunk[0].content_hash, "galaxy": CORPUS[2].content_hash}


async def test_delete_removes_every_chunk_of_a_document(engines):
    remote, local = engines()
    for engine in (remote, local):
        await engine.upsert("c", CORPUS)
    assert await remote.delete("c", ["binding", "missing"]) == (1, 2)
    assert await local.delete("c", ["binding", "missing"]) == (1, 2)
    stats = await remote.stats("c")
    assert (stats.documents, stats.chunks) == (5, len(CORPUS) - 2)
    got, want = await both(remote, local, "c", ["protein binding antibodies"])
    assert "binding" not in {h.doc_id for h in got[0]}
    assert_same_ranking(got, want)
    assert await remote.delete("nope", ["x"]) == (0, 0)


@pytest.mark.parametrize("text", ['foo AND (bar OR "', "foo~2 bar^10 *", "/[a-z]+/ \\ {} [] !! && ||",
                                  "NOT foo", "foo -bar +baz"])
async def test_query_syntax_in_user_text_is_searched_as_words(engines, text):
    remote, local = engines()
    for engine in (remote, local):
        await engine.upsert("c", CORPUS)
    got, want = await both(remote, local, "c", [text])
    assert_same_ranking(got, want)
    if "foo" in text:
        assert got[0][0].doc_id == "syntax"  # NOT / AND / - are words or nothing here, not operators


async def test_field_syntax_is_a_word_not_a_field(engines):
    """`title:foo AND (bar OR "` would be a query_string parse error (unterminated quote) or a title
    search; here it is three words, and `title:foo` one token (UAX#29 keeps a colon between letters)."""
    remote, _ = engines()
    await remote.upsert("c", [*CORPUS, *document("literal", ["the literal text title:foo appears here"])])
    (hits,) = await remote.search("c", ['title:foo AND (bar OR "'], 10, [])
    assert {h.doc_id for h in hits} == {"literal", "syntax"}
    (hits,) = await remote.search("c", ["title:foo"], 10, [])
    assert [h.doc_id for h in hits] == ["literal"]  # not the document titled "foo"


async def test_missing_collection_and_empty_queries(engines):
    remote, _ = engines()
    assert await remote.search("nope", ["x"], 10, []) == [[]]
    assert (await remote.stats("nope")).documents == 0
    assert await remote.content_hashes("nope", ["x"]) == {}
    await remote.upsert("c", CORPUS)
    assert await remote.search("c", ["the of and", "zzzunknown", "!!!"], 10, []) == [[], [], []]


async def test_bulk_ingest_keeps_at_most_the_configured_requests_in_flight(engines):
    remote, _ = engines(bulk_chunk_size=50, bulk_in_flight=2)
    real_bulk, in_flight, peak, calls = remote.client.bulk, 0, 0, 0

    async def counting_bulk(*args, **kwargs):
        nonlocal in_flight, peak, calls
        in_flight, calls = in_flight + 1, calls + 1
        peak = max(peak, in_flight)
        try:
            await asyncio.sleep(0.02)  # hold the slot long enough for others to queue behind it
            return await real_bulk(*args, **kwargs)
        finally:
            in_flight -= 1

    remote.client.bulk = counting_bulk
    docs = [c for n in range(120) for c in document(f"d{n}", [f"text number {n}", f"more words {n}", "third"])]
    result = await remote.upsert("c", docs)
    assert result.chunks_written == 360
    assert calls == 360 // 50 + 1 and peak == 2
    assert (await remote.stats("c")).chunks == 360


async def test_shard_failure_raises_engine_unavailable(engines):
    """An alias over the collection's index and a mis-mapped one: the server fails the search.

    A real cluster answers 200 with `_shards.failed: 1` and partial hits; noida fails the whole request
    (`all shards failed`). Both must surface as EngineUnavailable, never as a silent partial list."""
    remote, _ = engines()
    await remote.upsert("real", CORPUS)
    broken = f"{remote.index_prefix}broken"
    mis_mapped = {"mappings": {"properties": {"flat": {"type": "integer"}}}}
    await remote.client.indices.create(index=broken, body=mis_mapped)
    await remote.client.indices.put_alias(index=f"{remote.index('real')},{broken}", name=remote.index("c"))
    with pytest.raises(EngineUnavailable, match="all shards failed.*query_shard_exception"):
        await remote.search("c", ["protein"], 10, [])


async def test_partial_results_and_timeouts_are_rejected(engines):
    """noida never answers with partial shard failures or timed_out (it ignores `timeout` and fails a
    whole request on any shard error), so the parser is fed real noida responses, edited the way a
    real cluster reports a failed shard or a timeout."""
    remote, _ = engines()
    await remote.upsert("c", CORPUS)
    index = remote.index("c")
    ok = await remote.client.search(index=index, body={"query": {"match": {"flat": "protein"}}})
    assert check_search_response(ok) is ok
    failed = await remote.client.msearch(body=[{"index": index}, {"query": {"match": {"position": "not a number"}}}])
    (error,) = failed["responses"]
    with pytest.raises(EngineUnavailable, match="number_format_exception|query_shard_exception"):
        check_search_response(error)
    partial = {**ok, "_shards": {"total": 2, "successful": 1, "skipped": 0, "failed": 1,
                                 "failures": [{"shard": 1, "index": index, **error["error"]["failed_shards"][0]}]}}
    with pytest.raises(EngineUnavailable, match="1 of 2 shards failed"):
        check_search_response(partial)
    with pytest.raises(EngineUnavailable, match="timed out"):
        check_search_response({**ok, "timed_out": True})


async def test_a_server_that_stops_answering_degrades_the_leg_over_grpc(engines, noida):
    """SIGSTOP the real server: the search gives up after the client timeout, and the BM25 service
    answers UNAVAILABLE (the gateway's failed leg), not a hang or an UNKNOWN crash."""
    remote, _ = engines(timeout_s=1.0)
    await remote.upsert("c", CORPUS)
    server = grpc.aio.server()
    bm25_pb2_grpc.add_Bm25ServiceServicer_to_server(Bm25Servicer(remote), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    request = common_pb2.LegSearchRequest(collection="c", queries=[common_pb2.LegQuery(text="protein")], limit=5)
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = bm25_pb2_grpc.Bm25ServiceStub(channel)
            assert (await stub.Search(request, timeout=10)).lists[0].hits[0].doc_id == "protein"
            os.kill(noida.pid, signal.SIGSTOP)
            try:
                started = time.monotonic()
                with pytest.raises(grpc.aio.AioRpcError) as err:
                    await stub.Search(request, timeout=10)
                assert err.value.code() == grpc.StatusCode.UNAVAILABLE
                assert "opensearch-bm25" in err.value.details() and "timed out after 1.0s" in err.value.details()
                assert time.monotonic() - started < 5
                # The write/stat RPCs say the same: UNAVAILABLE (retryable), never UNKNOWN.
                with pytest.raises(grpc.aio.AioRpcError) as err:
                    await stub.Stats(common_pb2.StoreStatsRequest(collection="c"), timeout=20)
                assert err.value.code() == grpc.StatusCode.UNAVAILABLE, err.value.details()
            finally:
                os.kill(noida.pid, signal.SIGCONT)
            assert (await stub.Search(request, timeout=10)).lists[0].hits[0].doc_id == "protein"
    finally:
        await server.stop(None)


async def test_an_unreachable_cluster_raises_engine_unavailable():
    engine = OpenSearchBm25Engine(f"http://127.0.0.1:{UNUSED_PORT}", timeout_s=1.0, write_attempts=2)
    try:
        with pytest.raises(EngineUnavailable, match=f"127.0.0.1:{UNUSED_PORT}"):
            await engine.search("c", ["protein"], 10, [])
        with pytest.raises(EngineUnavailable):
            await engine.upsert("c", CORPUS)
    finally:
        await engine.close()


async def test_settings_select_and_configure_the_engine(monkeypatch):
    from pydantic import ValidationError

    from hybridsearch.bm25.service import build_engine
    from hybridsearch.config.settings import Settings

    monkeypatch.setenv("HYBRIDSEARCH_BM25__ENGINE", "opensearch")
    monkeypatch.setenv("HYBRIDSEARCH_BM25__OPENSEARCH_URL", "http://user:secret@127.0.0.1:29209")
    monkeypatch.setenv("HYBRIDSEARCH_BM25__OPENSEARCH_SHARDS", "3")
    monkeypatch.setenv("HYBRIDSEARCH_BM25__STOPWORDS", "lucene")
    engine = build_engine(Settings())
    try:
        assert isinstance(engine, OpenSearchBm25Engine)
        assert engine.url == "http://127.0.0.1:29209"  # credentials stay out of messages and stats
        assert engine.search_type == "dfs_query_then_fetch"
        assert engine.body["settings"]["index"]["number_of_shards"] == 3
        assert len(engine.body["settings"]["analysis"]["filter"]["hybridsearch_stop"]["stopwords"]) == 33
    finally:
        await engine.close()
    monkeypatch.setenv("HYBRIDSEARCH_BM25__OPENSEARCH_SHARDS", "0")
    with pytest.raises(ValidationError, match="opensearch_shards"):
        Settings()


def test_a_declared_language_maps_onto_the_same_snowball_chain_and_auto_is_refused():
    from hybridsearch.bm25.analyzer import SNOWBALL
    from hybridsearch.bm25.opensearch_index import index_body

    body = index_body(k1=1.2, b=0.75, stemmer="porter", stopwords="en_plus", shards=1, replicas=0, language="de")
    analysis = body["settings"]["analysis"]
    assert analysis["analyzer"][ANALYZER]["filter"] == ["lowercase", "hybridsearch_stop", "hybridsearch_stem"]
    assert analysis["filter"]["hybridsearch_stem"] == {"type": "snowball", "language": "German"}
    assert analysis["filter"]["hybridsearch_stop"]["stopwords"] == sorted(SNOWBALL["de"][1])
    english = index_body(k1=1.2, b=0.75, stemmer="porter", stopwords="en_plus", shards=1, replicas=0)
    assert english == index_body(k1=1.2, b=0.75, stemmer="porter", stopwords="en_plus", shards=1, replicas=0,
                                 language="en")
    with pytest.raises(ValueError, match="needs an embedded engine"):
        index_body(k1=1.2, b=0.75, stemmer="porter", stopwords="en_plus", shards=1, replicas=0, language="auto")


def test_an_auto_collection_on_opensearch_is_refused_at_start(monkeypatch):
    from hybridsearch.bm25.service import build_engine
    from hybridsearch.config.settings import Settings

    monkeypatch.setenv("HYBRIDSEARCH_BM25__ENGINE", "opensearch")
    monkeypatch.setenv("HYBRIDSEARCH_COLLECTIONS", '{"notes": {"language": "auto"}}')
    with pytest.raises(ValueError, match="needs an embedded engine"):
        build_engine(Settings())


async def test_a_german_collection_gets_german_analysis_on_the_server(noida):
    """Lucene's Snowball German stems as PyStemmer does on most words; the differences are pinned: Lucene
    ships an older Snowball German that keeps -erin and -et, which Snowball 3 (PyStemmer 3) removes."""
    from german_corpus import german_chunks

    from hybridsearch.bm25.analyzer import Analyzers

    remote = OpenSearchBm25Engine(URL, index_prefix=f"t{uuid.uuid4().hex[:10]}-", replicas=0,
                                  language_of=lambda _c: "de")
    try:
        await remote.upsert("de", german_chunks())
        embedded = Analyzers().language("de")
        same = "Die Häuser und die Wälder, der Baum über der Straße, Kündigungsfristen"
        assert await analyze(remote, "de", same) == embedded.analyze(same) == [
            "haus", "wald", "baum", "strass", "kundigungsfrist"]
        assert await analyze(remote, "de", "Mieterin überflutet") == ["mieterin", "uberflutet"]
        assert embedded.analyze("Mieterin überflutet") == ["miet", "uberflut"]
        (hits,) = await remote.search("de", ["die überfluteten Häuser"], 10, [])
        assert hits[0].doc_id == "d01"
    finally:
        await remote.client.indices.delete(index=remote.index("de"))
        await remote.close()


async def test_fuzzy_finds_typos_below_exact_matches_and_is_off_by_default(engines):
    remote, _ = engines()
    await remote.upsert("c", CORPUS)
    (off,) = await remote.search("c", ["chapreones"], 10, [])
    assert off == []
    (typo,), (exact,) = (await remote.search("c", ["chapreones"], 10, [], fuzzy=True),
                         await remote.search("c", ["chaperones"], 10, []))
    assert [h.doc_id for h in typo][:1] == [h.doc_id for h in exact][:1] == ["protein"]
    assert typo[0].score < exact[0].score  # the fuzzy clause is weighted FUZZY_WEIGHT
    # A word under MIN_FUZZY_CHARS characters is never fuzzed: "cel" does not find "cell".
    assert (await remote.search("c", ["cel"], 10, [], fuzzy=True)) == [[]]
    # An exact match still ranks above documents that only match a neighbour of the word.
    (cells,) = await remote.search("c", ["cell"], 10, [], fuzzy=True)
    assert cells[0].doc_id == "cells"


async def test_declared_fields_are_indexed_and_boosted_as_on_tantivy(engines, tmp_path):
    from hybridsearch.bm25.tantivy_engine import TantivyBm25Engine

    fields = {"summary": 2.0, "path": 0.5}
    # Paths as words: Lucene's standard tokenizer keeps "lru.ts" whole where the embedded analyzer splits it.
    docs = [chunk("long", "an lru cache evicts the least recently used entry when it runs out of room for more",
                  meta={"summary": "lru cache", "path": "src cache"}),
            chunk("short", "lru cache", meta={"summary": "a cache", "path": "src lru"})]
    remote, _ = engines(fields_of=lambda collection: fields if collection == "code" else {})
    local = TantivyBm25Engine(tmp_path / "tantivy", "porter", "en_plus", fields_of=lambda collection: fields)
    for engine in (remote, local):
        await engine.upsert("code", docs)
    mapping = await remote.client.indices.get_mapping(index=remote.index("code"))
    properties = next(iter(mapping.values()))["mappings"]["properties"]
    assert properties["field_summary"]["analyzer"] == ANALYZER and "field_name" not in properties
    for query in ["lru", "cache", "lru cache src"]:
        (got,), (want,) = await remote.search("code", [query], 10, []), await local.search("code", [query], 10, [])
        assert [h.doc_id for h in got] == [h.doc_id for h in want]
        assert [h.score for h in got] == pytest.approx([h.score for h in want], rel=0.02)
    (lru,) = await remote.search("code", ["lru"], 10, [])
    assert [h.doc_id for h in lru] == ["long", "short"]
    # The same documents in a collection without fields: the shorter text wins, as before.
    await remote.upsert("plain", docs)
    assert [h.doc_id for h in (await remote.search("plain", ["lru"], 10, []))[0]] == ["short", "long"]
    # A document without the fields is indexed and found. (Its field statistics differ: Lucene's idf
    # and average length count the documents that have the field, tantivy's every document.)
    for engine in (remote, local):
        await engine.upsert("code", [chunk("bare", "cache entry")])
        assert "bare" in {h.doc_id for h in (await engine.search("code", ["entry"], 10, []))[0]}
    await local.close()


async def test_create_collection_keeps_the_declared_language_only(engines):
    """CreateCollection on OpenSearch: the declared language's index, idempotent; another language is the
    tantivy engine's (FAILED_PRECONDITION, before any request reaches the cluster)."""
    from hybridsearch.contract.errors import InvalidArgument, Refusal

    remote, _ = engines()
    with pytest.raises(Refusal) as refused:
        await remote.create("c", "de")
    assert refused.value.code == grpc.StatusCode.FAILED_PRECONDITION
    assert "opensearch-bm25" in str(refused.value) and "bm25.engine=embedded" in str(refused.value)
    with pytest.raises(InvalidArgument):
        await remote.create("c", "xx")
    assert await remote.collections() == []
    assert await remote.create("c", "") == (True, "en")
    assert await remote.create("c", "en") == (False, "en")
    assert await remote.collections() == ["c"]
    stats = await remote.stats("c")
    assert (stats.documents, stats.details["language"]) == (0, "en")
    await remote.upsert("c", CORPUS)  # the index the create made takes writes as a write's own
    (hits,) = await remote.search("c", ["protein binding"], 10, [])
    assert hits[0].doc_id == "binding"


async def test_readers_filter_inside_the_search_and_counts(engines):
    """Document readers (security/acl.py) as a terms filter and a must_not in the one search: every readable hit and
    nothing else, counts of the readable only; new readers on the same text are written again (no hash match)."""
    from acl_scenario import ANA, READS, chunks, docs_of

    from hybridsearch.security.acl import parse_acl

    remote, _ = engines()
    await remote.upsert("acl", chunks())
    for who, (readers, reads) in READS.items():
        (hits,) = await remote.search("acl", ["lighthouse keepers"], 10, [], readers=readers)
        assert docs_of(hits) == reads and len(hits) == 2 * len(reads), who
        stats = await remote.stats("acl", readers)
        assert (stats.documents, stats.chunks) == (len(reads), 2 * len(reads)), who
    again = await remote.upsert("acl", chunks({"d-hr": parse_acl(["group:eng"])}))
    assert (again.documents_written, again.documents_unchanged) == (1, 4)
    assert (await remote.upsert("acl", chunks({"d-hr": parse_acl(["group:eng"])}))).documents_written == 0
    (hits,) = await remote.search("acl", ["payroll"], 10, [], readers=ANA)
    assert docs_of(hits) == {"d-hr"}
