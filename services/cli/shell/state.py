"""What a shell session holds and how each command changes it: the search settings (collections, mode,
effort, filters, page size) and the last page shown (its request, so `:next` continues that query even
after a setting changed, and its first hit's number). Pure: each change returns a new State."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from types import MappingProxyType

from hybridsearch.cli.shell.commands import ShellError
from hybridsearch.contract.limits import MAX_CONTEXT
from hybridsearch.client import EFFORTS, MODES, Not, search_request
from hybridsearch.v1 import search_pb2

CLEAR = "clear"


@dataclass(frozen=True)
class Page:
    """A page shown: what was asked (the token belongs to exactly that request) and what came back."""

    query: str
    request: search_pb2.SearchRequest
    response: search_pb2.SearchResponse

    @property
    def first(self) -> int:
        """The number of its first hit (page 2 of ten starts at 11)."""
        return self.response.offset + 1

    def hit(self, number: int) -> search_pb2.SearchHit:
        """Hit `number` as the table numbers it; ShellError when this page does not show it."""
        index = number - self.first
        if not 0 <= index < len(self.response.hits):
            shown = (f"hits {self.first}-{self.first + len(self.response.hits) - 1}" if self.response.hits
                     else "no hits")
            raise ShellError(f"hit {number} is not on this page ({shown})")
        return self.response.hits[index]

    def next_request(self) -> search_pb2.SearchRequest:
        """The request for the next page: this one with the answer's page token (offset paging cleared)."""
        if not self.response.next_page_token:
            raise ShellError("no more pages for this query")
        request = search_pb2.SearchRequest()
        request.CopyFrom(self.request)
        request.offset = 0
        request.explain = False
        request.page_token = self.response.next_page_token
        return request


def add_filter(filters: MappingProxyType, item: str) -> MappingProxyType:
    """`field=value` (a field given again widens to any of its values) or `field!=value`."""
    negated = "!=" in item
    name, sep, value = item.partition("!=" if negated else "=")
    if not sep or not name or not value:
        raise ShellError(f"{item!r}: a filter is field=value or field!=value")
    new = dict(filters)
    if negated:
        new[name] = Not(value)
    else:
        old = new.get(name)
        if old is None or isinstance(old, Not):
            new[name] = value
        else:
            values = [old] if isinstance(old, str) else list(old)
            new[name] = values if value in values else [*values, value]
    return MappingProxyType(new)


def filter_words(filters: MappingProxyType) -> list[str]:
    """The filters as the user types them."""
    words = []
    for name, value in filters.items():
        if isinstance(value, Not):
            words.append(f"{name}!={value}")
        else:
            words += [f"{name}={v}" for v in ([value] if isinstance(value, str) else value)]
    return words


@dataclass(frozen=True)
class State:
    collections: tuple[str, ...] = ("default",)
    mode: str = "hybrid"
    effort: str = "balanced"
    filters: MappingProxyType = field(default_factory=lambda: MappingProxyType({}))
    top_k: int = 10
    context: int = 0  # neighbouring chunks before and after each hit (SearchRequest.context)
    page: Page | None = None

    def with_mode(self, mode: str) -> State:
        if mode.lower() not in MODES:
            raise ShellError(f"unknown mode {mode!r}; one of {', '.join(MODES)}")
        return replace(self, mode=mode.lower())

    def with_effort(self, effort: str) -> State:
        if effort.lower() not in EFFORTS:
            raise ShellError(f"unknown effort {effort!r}; one of {', '.join(EFFORTS)}")
        return replace(self, effort=effort.lower())

    def with_context(self, chunks: str) -> State:
        if not chunks.isdigit() or not 0 <= int(chunks) <= MAX_CONTEXT:
            raise ShellError(f"context is a number of chunks, 0-{MAX_CONTEXT}; got {chunks!r}")
        return replace(self, context=int(chunks))

    def with_filters(self, args: tuple[str, ...]) -> State:
        if args == (CLEAR,):
            return replace(self, filters=MappingProxyType({}))
        filters = self.filters
        for item in args:
            filters = add_filter(filters, item)
        return replace(self, filters=filters)

    def using(self, collections: tuple[str, ...]) -> State:
        names = tuple(dict.fromkeys(c.strip(",") for c in collections if c.strip(",")))
        if not names:
            raise ShellError("usage: :use COLLECTION ...")
        return replace(self, collections=names, page=None)

    def showing(self, page: Page) -> State:
        return replace(self, page=page)

    def last_page(self) -> Page:
        if self.page is None:
            raise ShellError("no query yet: type one first")
        return self.page

    def request(self, query: str, explain: bool = False) -> search_pb2.SearchRequest:
        """The first page's request for `query` under the current settings."""
        where = ({"collections": list(self.collections)} if len(self.collections) > 1
                 else {"collection": self.collections[0]})
        try:
            return search_request(query, top_k=self.top_k, mode=self.mode, effort=self.effort, explain=explain,
                                  filters=dict(self.filters), context=self.context, **where)
        except ValueError as err:
            raise ShellError(str(err)) from None

    def settings_line(self) -> str:
        filters = " ".join(filter_words(self.filters)) or "none"
        return (f"collections {', '.join(self.collections)} | mode {self.mode} | effort {self.effort} | "
                f"filters {filters} | context {self.context} | {self.top_k} a page")
