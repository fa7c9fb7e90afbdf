"""Page tokens: signed, bound to their query, expiring; each failure a clear INVALID_ARGUMENT."""

from __future__ import annotations

import pytest

from hybridsearch.common.validation import InvalidArgument
from hybridsearch.gateway.paging import PageTokens, request_digest
from hybridsearch.v1 import search_pb2

TOKENS = PageTokens(b"s" * 32, ttl_s=600)
REQUEST = search_pb2.SearchRequest(query="rank fusion", collection="docs", top_k=10)
DIGEST = request_digest(REQUEST)


def test_a_token_round_trips():
    token = TOKENS.issue("abc123", 10, DIGEST, now=1000.0)
    page = TOKENS.check(token, DIGEST, now=1001.0)
    assert (page.order_id, page.offset, page.expires) == ("abc123", 10, 1600)


def test_the_next_page_of_the_same_query_has_the_same_digest():
    later = search_pb2.SearchRequest(query="rank fusion", collection="docs", top_k=20, page_token="x", offset=5)
    assert request_digest(later) == DIGEST
    assert request_digest(search_pb2.SearchRequest(query="rank fusion", collection="other")) != DIGEST
    assert request_digest(search_pb2.SearchRequest(query="rank fusion", collection="docs", min_score=0.5)) != DIGEST


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
    other = request_digest(search_pb2.SearchRequest(query="vector search", collection="docs"))
    with pytest.raises(InvalidArgument, match="another query"):
        TOKENS.check(token, other, now=1001.0)


def test_short_secret_is_refused():
    with pytest.raises(ValueError, match="16 bytes"):
        PageTokens(b"short", ttl_s=10)
