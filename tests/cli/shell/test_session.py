"""The shell's session against a real stack: a query, its pages numbered on, settings and filters that
change what is sent, `:explain`, and `:open` / `:collections` on a gateway without the CollectionService
(a clear "not available on this server", whether the client lacks the call or the server answers
UNIMPLEMENTED)."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest
from rich.console import Console

from hybridsearch.cli.shell.catalog import Catalog, NotAvailable
from hybridsearch.cli.shell.session import Session
from hybridsearch.cli.shell.state import State
from hybridsearch.client import GatewayClient
from hybridsearch.client.sync import _call
from hybridsearch.v1 import common_pb2

pytestmark = pytest.mark.stack
QUERY = "how are ranked lists fused"


def printed(renderables) -> str:
    console = Console(width=120, record=True, file=open("/dev/null", "w"))
    for r in renderables:
        console.print(r)
    return console.export_text()


def ranks(text: str) -> list[int]:
    return [int(m) for m in re.findall(r"^\s*(\d+) 0\.\d{3} ", text, re.MULTILINE)]


@pytest.fixture
def session(gateway, corpus):
    return Session(gateway, State(collections=(corpus.name,), top_k=3).with_effort("fast"))


def test_pages_number_on_and_follow_the_first_order(session, gateway, corpus):
    session.state = replace(session.state, top_k=2)  # the sample corpus has 7 documents
    whole = [h.doc_id for h in gateway.search(QUERY, collection=corpus.name, top_k=6, effort="fast").hits]
    first = printed(session.handle(QUERY))
    assert ranks(first) == [1, 2] and "more: :next" in first
    shown = []
    for expected in ([3, 4], [5, 6]):
        assert ranks(printed(session.handle(":next"))) == expected
        shown += [h.doc_id for h in session.state.page.response.hits]
    assert shown == whole[2:6]


def test_next_continues_its_query_after_the_effort_changed(session):
    session.handle(QUERY)
    assert printed(session.handle(":effort balanced")).strip() == "effort: balanced"
    assert ranks(printed(session.handle(":next"))) == [4, 5, 6]  # the token is the fast query's
    assert session.state.page.request.effort == common_pb2.EFFORT_FAST


def test_filters_and_mode_shape_the_search(session, corpus):
    session.handle(":filter parity=odd")
    session.handle(":mode bm25")
    session.state = replace(session.state, top_k=10)
    text = printed(session.handle("fusion ranked lists rerank vector"))
    ids = [h.doc_id for h in session.state.page.response.hits]
    assert ids and {corpus.parities[i] for i in ids} == {"odd"}, text
    assert session.state.page.request.mode == common_pb2.RETRIEVAL_MODE_BM25
    assert printed(session.handle(":filter clear")).strip() == "filters: none"


def test_context_shows_each_hits_neighbours(session):
    assert printed(session.handle(":context 1")).strip() == "context: 1"
    text = printed(session.handle(QUERY))
    assert session.state.page.request.context == 1
    assert re.search(r"^\s*\d+\. (before|after) \(", text, re.MULTILINE), text
    assert "context is a number of chunks, 0-5" in printed(session.handle(":context 9"))


def test_explain_reads_the_last_query(session):
    session.handle(QUERY)
    text = printed(session.handle(":explain"))
    assert f"explain: {QUERY}" in text and "bm25: ok" in text and re.search(r"fusion: method \w+", text)
    assert "method 4" not in text


def test_open_shows_the_whole_document(session):
    session.handle(QUERY)
    session.handle(":next")
    hit = session.state.page.hit(5)
    text = " ".join(printed(session.handle(":open 5")).split())
    assert hit.title in text and "not available" not in text
    assert " ".join(hit.snippet.removeprefix("…").removesuffix("…").split())[:40] in text  # the snippet is in it
    assert "hit 1 is not on this page (hits 4-6)" in printed(session.handle(":open 1"))


def test_collections_lists_what_the_key_may_read(session, corpus):
    text = printed(session.handle(":collections"))
    assert corpus.name in text and "not available" not in text


class UnimplementedResources(GatewayClient):
    """The resource calls as a client of the CollectionService makes them, on a gateway that lacks it."""

    def list_collections(self):  # a method the gateway does not serve: UNIMPLEMENTED
        method = self.channel.unary_unary("/hybridsearch.v1.CollectionService/ListCollectionsOfTheFuture",
                                          request_serializer=lambda _: b"", response_deserializer=bytes)
        return _call(method, None, 10)


def test_a_server_without_the_rpc_is_not_available(stack):
    with UnimplementedResources(stack.settings.endpoints.addr("gateway")) as client:
        with pytest.raises(NotAvailable, match="ListCollections is not available on this server"):
            Catalog(client).collections()


def test_errors_are_one_line_and_the_session_goes_on(session, corpus):
    assert printed(session.handle(":next")).strip() == "no query yet: type one first"
    text = printed(session.handle(":use Bad/Name"))
    assert printed(session.handle("rank fusion")).startswith("INVALID_ARGUMENT: "), text
    session.handle(f":use {corpus.name}")
    assert ranks(printed(session.handle("rank fusion"))) == [1, 2, 3]
