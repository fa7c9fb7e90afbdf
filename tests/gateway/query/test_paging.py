"""Page tokens: signed, bound to their query and its collections, expiring; each failure a clear
INVALID_ARGUMENT."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json

import pytest

from hybridsearch.contract.errors import InvalidArgument
from hybridsearch.config.settings import Settings
from hybridsearch.gateway.query.request import plan_search
from hybridsearch.fusion.packed import FusedDoc, LegEvidence, pack_docs
from hybridsearch.gateway.query.paging import MAX_TOKEN_CHARS, PageTokens, kept_hits, request_digest, token_collections
from hybridsearch.gateway.query.request import MAX_COLLECTIONS
from hybridsearch.v1 import common_pb2, fusion_pb2, paging_pb2, search_pb2


def digest(request: search_pb2.SearchRequest) -> str:
    """The page digest of a request as the gateway makes it: over the collections its plan names."""
    shape = search_pb2.SearchRequest(query=request.query, collection=request.collection, collections=request.collections)
    return request_digest(request, plan_search(shape, Settings()).requested)

TOKENS = PageTokens(b"s" * 32, ttl_s=600)
REQUEST = search_pb2.SearchRequest(query="rank fusion", collection="docs", top_k=10)
DIGEST = digest(REQUEST)


def test_a_token_round_trips():
    token = TOKENS.issue("abc123", 10, DIGEST, now=1000.0)
    page = TOKENS.check(token, DIGEST, now=1001.0)
    assert (page.order_id, page.offset, page.expires) == ("abc123", 10, 1600)


def test_the_next_page_of_the_same_query_has_the_same_digest():
    later = search_pb2.SearchRequest(query="rank fusion", collection="docs", top_k=20, page_token="x", offset=5)
    assert digest(later) == DIGEST
    assert digest(search_pb2.SearchRequest(query="rank fusion", collection="other")) != DIGEST
    assert digest(search_pb2.SearchRequest(query="rank fusion", collection="docs", min_score=0.5)) != DIGEST


@pytest.mark.parametrize("mangle, message", [
    (lambda t: t[:-2] + ("AA" if not t.endswith("AA") else "BB"), "altered"),
    (lambda t: "x" + t, "altered"),
    (lambda t: "no-dot", "not a page token"),
    (lambda t: "a.b.c", "not a page token"),
    (lambda t: "€." + t.split(".")[1], "not a page token"),
    (lambda t: t * 10, "not a page token"),
])
def test_tampered_tokens_are_refused(mangle, message):
    token = TOKENS.issue("abc123", 10, DIGEST, now=1000.0)
    with pytest.raises(InvalidArgument, match=message):
        TOKENS.check(mangle(token), DIGEST, now=1001.0)


def test_another_deployments_token_is_refused():
    token = PageTokens(b"t" * 32, ttl_s=600).issue("abc123", 10, DIGEST, now=1000.0)
    with pytest.raises(InvalidArgument, match="another deployment"):
        TOKENS.check(token, DIGEST, now=1001.0)


def test_expired_token_says_so():
    token = TOKENS.issue("abc123", 10, DIGEST, now=1000.0)
    with pytest.raises(InvalidArgument, match="expired; run the search again"):
        TOKENS.check(token, DIGEST, now=1601.0)


def test_token_of_another_query_is_refused():
    token = TOKENS.issue("abc123", 10, DIGEST, now=1000.0)
    other = digest(search_pb2.SearchRequest(query="vector search", collection="docs"))
    with pytest.raises(InvalidArgument, match="another query"):
        TOKENS.check(token, other, now=1001.0)


def test_short_secret_is_refused():
    with pytest.raises(ValueError, match="16 bytes"):
        PageTokens(b"short", ttl_s=10)


def test_a_token_names_the_collections_its_first_page_searched():
    token = TOKENS.issue("abc123", 10, DIGEST, now=1000.0)
    assert TOKENS.check(token, DIGEST, now=1001.0).collections == ("docs",)
    assert token_collections(token) == ("docs",)  # without the secret
    several = search_pb2.SearchRequest(query="rank fusion", collections=["pa-docs", "pb-docs"])
    assert token_collections(TOKENS.issue("abc123", 10, digest(several))) == ("pa-docs", "pb-docs")
    empty = search_pb2.SearchRequest(query="rank fusion")
    assert token_collections(TOKENS.issue("abc123", 10, digest(empty))) == ("default",)


def test_a_later_pages_token_carries_the_collections_on():
    """search.py issues the next page's token from the checked one (order id, offset, digest): the
    collections travel in the digest."""
    first = TOKENS.check(TOKENS.issue("abc123", 10, DIGEST, now=1000.0), DIGEST, now=1001.0)
    later = TOKENS.issue(first.order_id, 20, first.digest, now=1001.0)
    assert token_collections(later) == ("docs",) and TOKENS.check(later, DIGEST, now=1002.0).offset == 20


def test_the_same_query_on_other_collections_is_another_query():
    mine = search_pb2.SearchRequest(query="rank fusion", collections=["pa-docs", "pb-docs"])
    reordered = search_pb2.SearchRequest(query="rank fusion", collections=["pb-docs", "pa-docs"])
    token = TOKENS.issue("abc123", 10, digest(mine), now=1000.0)
    with pytest.raises(InvalidArgument, match="another query"):
        TOKENS.check(token, digest(reordered), now=1001.0)


def test_unreadable_tokens_name_no_collection():
    deep = base64.urlsafe_b64encode(b"[" * 700).rstrip(b"=").decode() + ".AAAA"  # deeply nested JSON
    for garbled in ("", "nonsense", "a.b.c", "€.x", "x" * 2000, "e30.AAAA", "bnVsbA.AAAA", deep):  # {} and null
        assert token_collections(garbled) == ()


def test_a_token_of_version_1_is_refused_clearly():
    payload = json.dumps({"v": 1, "id": "abc123", "o": 10, "d": "0" * 24, "e": 1600}, separators=(",", ":")).encode()
    b64 = lambda b: base64.urlsafe_b64encode(b).rstrip(b"=").decode()  # noqa: E731
    token = f"{b64(payload)}.{b64(hmac.new(b's' * 32, payload, hashlib.sha256).digest()[:16])}"
    assert token_collections(token) == ()  # it names none: the request's own collections are checked
    with pytest.raises(InvalidArgument, match="version 1 is not understood; run the search again"):
        TOKENS.check(token, DIGEST, now=1001.0)


def test_a_token_of_the_most_and_longest_collections_fits():
    names = [f"{i}" + "c" * 62 for i in range(MAX_COLLECTIONS)]
    request = search_pb2.SearchRequest(query="rank fusion", collections=names)
    token = TOKENS.issue("0" * 24, 990, digest(request), now=1e10)
    assert len(token) <= MAX_TOKEN_CHARS
    assert TOKENS.check(token, digest(request), now=1e10).collections == tuple(names)


def test_a_kept_order_reads_its_columns_and_one_kept_by_an_earlier_version_its_messages():
    """KeptOrder.fused (the columns) since the packed fused lists; an order kept before them, in Redis when the
    gateway is upgraded, holds FusedHits in `hits` and pages on alike."""
    docs = [FusedDoc("a", "a#0", 2.0, 1.0, [LegEvidence(common_pb2.LEG_BM25, common_pb2.QUERY_KIND_ORIGINAL, 1, 7.5)]),
            FusedDoc("b", "b#1", 1.0, 0.5, [])]
    rows = [(d.doc_id, d.chunk_id, d.fusion_score, d.normalized_score, [tuple(e) for e in d.evidence]) for d in docs]
    packed = paging_pb2.KeptOrder.FromString(paging_pb2.KeptOrder(fused=pack_docs(docs)).SerializeToString())
    earlier = paging_pb2.KeptOrder(hits=[
        fusion_pb2.FusedHit(doc_id="a", chunk_id="a#0", fusion_score=2.0, normalized_score=1.0, evidence=[
            fusion_pb2.LegEvidence(leg=common_pb2.LEG_BM25, kind=common_pb2.QUERY_KIND_ORIGINAL, rank=1, score=7.5)]),
        fusion_pb2.FusedHit(doc_id="b", chunk_id="b#1", fusion_score=1.0, normalized_score=0.5)])
    for order in (packed, earlier):
        assert [(h.doc_id, h.chunk_id, h.fusion_score, h.normalized_score,
                 [(e.leg, e.kind, e.rank, e.score) for e in h.evidence]) for h in kept_hits(order)] == rows
    assert kept_hits(paging_pb2.KeptOrder()) == []
