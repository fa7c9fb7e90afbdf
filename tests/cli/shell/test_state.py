"""The shell's state as pure changes: settings, filters, the request it sends, and the page it keeps for
`:next` and `:open N` (numbered on from the page's offset)."""

from __future__ import annotations

import pytest

from hybridsearch.cli.shell.commands import ShellError
from hybridsearch.cli.shell.state import Page, State, filter_words
from hybridsearch.client import Not
from hybridsearch.v1 import common_pb2, search_pb2


def test_settings_change_by_name_and_refuse_unknown_values():
    state = State().with_mode("BM25").with_effort("fast")
    assert (state.mode, state.effort) == ("bm25", "fast")
    with pytest.raises(ShellError, match="unknown mode 'dense'; one of bm25, vector, hybrid"):
        state.with_mode("dense")
    with pytest.raises(ShellError, match="unknown effort 'max'"):
        state.with_effort("max")


def test_filters_add_widen_negate_and_clear():
    state = State().with_filters(("lang=en", "team=a")).with_filters(("team=b", "status!=draft", "team=a"))
    assert dict(state.filters) == {"lang": "en", "team": ["a", "b"], "status": Not("draft")}
    assert filter_words(state.filters) == ["lang=en", "team=a", "team=b", "status!=draft"]
    assert not state.with_filters(("clear",)).filters
    with pytest.raises(ShellError, match="'lang': a filter is field=value or field!=value"):
        state.with_filters(("lang",))


def test_the_request_carries_every_setting():
    state = State(collections=("notes",), top_k=5).with_mode("bm25").with_effort("fast").with_filters(("lang=en",))
    request = state.request("rank fusion")
    assert (request.query, request.collection, request.top_k) == ("rank fusion", "notes", 5)
    assert (request.mode, request.effort) == (common_pb2.RETRIEVAL_MODE_BM25, common_pb2.EFFORT_FAST)
    assert [(f.field, f.equals) for f in request.filters] == [("lang", "en")]
    several = State().using(("notes", "code,")).request("q")
    assert (several.collection, list(several.collections)) == ("", ["notes", "code"])


def page(offset: int, n: int, token: str = "T") -> Page:
    request = State().with_effort("fast").request("q", explain=True)
    hits = [search_pb2.SearchHit(doc_id=f"d{offset + i + 1}") for i in range(n)]
    return Page("q", request, search_pb2.SearchResponse(hits=hits, offset=offset, next_page_token=token))


def test_a_page_numbers_its_hits_on_from_its_offset():
    second = page(10, 10)
    assert second.first == 11 and second.hit(11).doc_id == "d11" and second.hit(20).doc_id == "d20"
    with pytest.raises(ShellError, match=r"hit 3 is not on this page \(hits 11-20\)"):
        second.hit(3)


def test_next_continues_the_pages_own_request_even_after_a_setting_changed():
    state = State().with_effort("fast")
    state = state.showing(page(0, 10)).with_effort("thorough")
    following = state.last_page().next_request()
    assert following.page_token == "T" and following.effort == common_pb2.EFFORT_FAST and not following.explain
    with pytest.raises(ShellError, match="no more pages"):
        page(0, 3, token="").next_request()


def test_no_page_before_the_first_query_and_none_after_use():
    with pytest.raises(ShellError, match="no query yet"):
        State().last_page()
    with pytest.raises(ShellError, match="no query yet"):
        State().showing(page(0, 1)).using(("other",)).last_page()
