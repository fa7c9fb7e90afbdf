"""SearchService.Search as a newcomer follows it (docs/architecture.md, "The path of a search"): one search's request,
and the plans made of it, pass through the query path's modules in the page's order and enter none more than twice.

The journey is traced as the search runs (sys.setprofile): each call of a hybridsearch function that is handed the
request or a plan of it (a SearchPlan) is a step into that function's module, and consecutive steps in one module are
one stay (the plan's own accessors are read, not entered). A module entered a third time means the search goes back and forth (a stage calling its own module's
helpers between other modules' calls, a record every stage calls into), which the house was rebuilt to end (issue 34).
The search runs over in-process stand-ins of the services (tests/query_standins.py) and a real Redis (the page
order), with its one retrieval leg: no two tasks interleave their steps.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import pytest

from hybridsearch.gateway.query.request import SearchPlan
from hybridsearch.gateway.query.search import SearchServicer
from hybridsearch.gateway.resources.catalog import Catalog
from hybridsearch.v1 import common_pb2, search_pb2, stores_pb2
from query_standins import Call, backends, settings
from stacks import scratch_redis

SERVICES = str(Path(__import__("hybridsearch").__file__).parent)
REQUEST = dict(query="fusion of ranked lists", collection="notes", mode=common_pb2.RETRIEVAL_MODE_BM25,
               effort=common_pb2.EFFORT_BALANCED, expand=False, top_k=2, context=1, explain=True)


class Context:
    """The servicer's view of its call: no client deadline; the done callbacks run when the test says."""

    def __init__(self) -> None:
        self.done = []

    def time_remaining(self):
        return None

    def add_done_callback(self, callback) -> None:
        self.done.append(callback)

    async def abort(self, code, details):
        raise AssertionError(f"the search was refused: {code} {details}")


async def traced(servicer: SearchServicer, request: search_pb2.SearchRequest) -> tuple[search_pb2.SearchResponse, list[str]]:
    """The answer and the modules the search stayed in, in order (consecutive steps in one module: one stay)."""
    steps: list[str] = []
    seen: dict[int, object] = {}  # frames already counted (kept alive: an id is not reused); a coroutine resumed is one

    def profile(frame, event, arg) -> None:
        code = frame.f_code
        if event != "call" or not code.co_filename.startswith(SERVICES) or id(frame) in seen:
            return
        seen[id(frame)] = frame
        names = code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]
        if names[:1] == ("self",) and isinstance(frame.f_locals.get("self"), SearchPlan):
            return  # the plan's own accessors (SearchPlan.plan_of, .store_name, ...): reading it, as an attribute is
        if any(frame.f_locals.get(n) is request or isinstance(frame.f_locals.get(n), SearchPlan) for n in names):
            module = str(Path(code.co_filename).relative_to(SERVICES))
            if not steps or steps[-1] != module:
                steps.append(module)

    context = Context()
    sys.setprofile(profile)
    try:
        response = await servicer.Search(request, context)
    finally:
        sys.setprofile(None)
    for callback in context.done:  # the answer has gone: the page order is kept
        callback(context)
    return response, steps


def stayed_at_most_twice(stays: list[str]) -> dict[str, int]:
    return {module: n for module, n in Counter(stays).items() if n > 2}


def in_order(stays: list[str], *modules: str) -> bool:
    firsts = [stays.index(f"gateway/query/{m}.py") for m in modules]
    return firsts == sorted(firsts)


@pytest.fixture
async def servicer():
    with scratch_redis("walk-") as url:
        s = settings().model_copy(update={"redis": settings().redis.model_copy(update={"state_url": url, "cache_url": url})})
        parts = backends()
        for store in (parts.bm25, parts.vector):  # the catalog's question: the collection is held
            store.ListCollections = Call(lambda r: stores_pb2.StoreCollectionsResponse(
                collections=[stores_pb2.StoreCollection(name=n) for n in r.names]))
        servicer = SearchServicer(s, parts, Catalog(s, parts))
        try:
            yield servicer
        finally:
            await servicer.pager.close()


async def test_a_first_page_enters_each_module_at_most_twice_in_the_pages_order(servicer):
    response, stays = await traced(servicer, search_pb2.SearchRequest(**REQUEST))
    assert len(response.hits) == 2 and response.next_page_token and response.explain.fusion_order
    assert len(stays) > 20, stays  # the trace saw the journey
    assert stayed_at_most_twice(stays) == {}, stays
    assert in_order(stays, "search", "request", "locate", "retrieve", "fuse", "rerank", "respond", "paging"), stays


async def test_a_later_page_enters_each_module_at_most_twice(servicer):
    first, _ = await traced(servicer, search_pb2.SearchRequest(**REQUEST))
    await next(iter(servicer.pager._pending.values()))  # its order stored
    later, stays = await traced(servicer, search_pb2.SearchRequest(**REQUEST, page_token=first.next_page_token))
    assert [h.doc_id for h in later.hits] and later.offset == 2 and {h.doc_id for h in later.hits}.isdisjoint(
        {h.doc_id for h in first.hits})
    assert stayed_at_most_twice(stays) == {}, stays
    assert in_order(stays, "search", "request", "locate", "next_page", "paging"), stays
