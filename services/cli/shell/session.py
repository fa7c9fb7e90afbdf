"""One line in, renderables out: the shell without its terminal. A query runs under the current State;
a command changes the State or reads the gateway; every refusal (a bad line, an INVALID_ARGUMENT, a
server that lacks an RPC) is one printed line and the session goes on."""

from __future__ import annotations

from collections.abc import Callable

from rich.console import RenderableType

from hybridsearch.cli.shell import render
from hybridsearch.cli.shell.catalog import Catalog, Document, NotAvailable, ShellClient
from hybridsearch.cli.shell.commands import Command, Invocation, Query, ShellError, hit_number, parse
from hybridsearch.cli.shell.state import Page, State, filter_words
from hybridsearch.client import HybridSearchError
from hybridsearch.v1 import search_pb2


class Session:
    def __init__(self, client: ShellClient, state: State | None = None) -> None:
        self.client = client
        self.catalog = Catalog(client)
        self.state = state or State()
        self.done = False
        self.actions: dict[Command, Callable[[tuple[str, ...]], list[RenderableType]]] = {
            Command.NEXT: self.next_page,
            Command.EXPLAIN: self.explain,
            Command.MODE: lambda args: self.setting(args, "mode", self.state.with_mode),
            Command.EFFORT: lambda args: self.setting(args, "effort", self.state.with_effort),
            Command.CONTEXT: lambda args: self.setting(args, "context", self.state.with_context),
            Command.FILTER: self.filters,
            Command.USE: self.use,
            Command.OPEN: self.open,
            Command.COLLECTIONS: self.collections,
            Command.HELP: lambda args: [render.help_table()],
            Command.QUIT: self.quit,
        }

    def prompt(self) -> str:
        s = self.state
        return f"{','.join(s.collections)} [{s.mode}/{s.effort}]> "

    def handle(self, line: str) -> list[RenderableType]:
        try:
            parsed = parse(line)
            if parsed is None:
                return []
            if isinstance(parsed, Query):
                return self.search(parsed.text)
            return self.run(parsed)
        except ShellError as err:
            return [render.error(str(err))]
        except HybridSearchError as err:
            return [render.error(f"{err.code().name}: {err.details()}")]

    def run(self, invocation: Invocation) -> list[RenderableType]:
        return self.actions[invocation.command](invocation.args)

    def show(self, query: str, request: search_pb2.SearchRequest) -> list[RenderableType]:
        page = Page(query, request, self.client.search(request))
        self.state = self.state.showing(page)
        return [render.results(page)]

    def search(self, query: str) -> list[RenderableType]:
        return self.show(query, self.state.request(query))

    def next_page(self, args: tuple[str, ...]) -> list[RenderableType]:
        page = self.state.last_page()
        return self.show(page.query, page.next_request())

    def explain(self, args: tuple[str, ...]) -> list[RenderableType]:
        page = self.state.last_page()
        request = search_pb2.SearchRequest()
        request.CopyFrom(page.request)
        request.explain, request.page_token, request.offset = True, "", 0
        return [render.note(f"explain: {page.query}"), render.explanation(self.client.search(request))]

    def setting(self, args: tuple[str, ...], name: str, change: Callable[[str], State]) -> list[RenderableType]:
        if args:
            self.state = change(args[0])
        return [render.note(f"{name}: {getattr(self.state, name)}")]

    def filters(self, args: tuple[str, ...]) -> list[RenderableType]:
        if args:
            self.state = self.state.with_filters(args)
        return [render.note(f"filters: {' '.join(filter_words(self.state.filters)) or 'none'}")]

    def use(self, args: tuple[str, ...]) -> list[RenderableType]:
        self.state = self.state.using(args)
        return [render.note(f"collections: {', '.join(self.state.collections)}")]

    def open(self, args: tuple[str, ...]) -> list[RenderableType]:
        hit = self.state.last_page().hit(hit_number(args[0]))
        collection = hit.collection or self.state.collections[0]
        try:
            found = self.catalog.documents(collection, [hit.doc_id])
        except NotAvailable as err:
            text = hit.full_text or hit.snippet
            what = "the hit's whole chunk" if hit.full_text or hit.complete else "the hit's snippet"
            return [render.document(Document(hit.doc_id, hit.title, text), f"{err}: showing {what}")]
        if not found:
            return [render.error(f"{hit.doc_id} is no longer stored in {collection}")]
        return [render.document(found[0])]

    def collections(self, args: tuple[str, ...]) -> list[RenderableType]:
        try:
            return [render.collections(self.catalog.collections())]
        except NotAvailable as err:
            return [render.error(f"{err}; this session searches {', '.join(self.state.collections)}")]

    def quit(self, args: tuple[str, ...]) -> list[RenderableType]:
        self.done = True
        return []
