"""Where a search reads: the request's plan (gateway.query.request), sealed where its collections are
(gateway.query.sealed), without the collections no store holds, and each collection named as the stores hold
it (an alias's serving generation: gateway/resources/aliases.py).

A first page of one collection that no store holds is NOT_FOUND; of several, the search goes on with the others
and a notice says which are missing (none at all: NOT_FOUND naming them). A later page reads its first page's
kept order, so only where its collections are read from is looked up. A sealed collection without its key is
FAILED_PRECONDITION whether or not a store holds it yet: the seal comes first.
"""

from __future__ import annotations

from dataclasses import replace

from hybridsearch.config.settings import Settings
from hybridsearch.gateway.query.request import SearchPlan, plan_search
from hybridsearch.gateway.query.sealed import seal_plan
from hybridsearch.gateway.resources.catalog import Catalog, narrowed
from hybridsearch.security.sealing import Sealer
from hybridsearch.v1 import search_pb2


async def locate(plan: SearchPlan, request: search_pb2.SearchRequest, settings: Settings, sealer: Sealer,
                 catalog: Catalog) -> tuple[SearchPlan, list[str]]:
    """The request's plan (request.plan_search) sealed, of the collections the search reads, resolved to their store
    names; a notice for each collection of several that no store holds. A Refusal (NOT_FOUND, FAILED_PRECONDITION;
    INVALID_ARGUMENT from the plan of a narrowed request)."""
    plan = seal_plan(plan, sealer)
    searched = [c for c, _ in plan.configs]
    located = await catalog.located(searched, check=not plan.page_token)
    notices: list[str] = []
    if located.missing:
        narrow, notices = narrowed(request, searched, located.missing)
        plan = replace(seal_plan(plan_search(narrow, settings), sealer), requested=plan.requested)  # pages: as asked
    parts = tuple(replace(part, stored=located.stored.get(part.collection, "")) for part in plan.parts)
    return replace(plan, parts=parts, stored=located.stored.get(plan.collection, "")), notices
