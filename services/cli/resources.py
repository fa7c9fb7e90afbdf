"""Collections and documents as resources: `collections` (list, drop), `docs get/delete`, `stats`. Tables
wrap (fold) their cells instead of cutting them, at any terminal width."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Annotated, TypeVar

import typer
from google.protobuf.json_format import MessageToDict
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from hybridsearch.cli.base import SEARCH, app, console, gateway_client
from hybridsearch.cli.tables import Column, name_column, wrapping_table

T = TypeVar("T")
COLLECTION = typer.Option("--collection", "-c", help="the collection")

collections_app = typer.Typer(help="Collections: list them (no command), drop one", invoke_without_command=True)
app.add_typer(collections_app, name="collections", rich_help_panel=SEARCH)
docs_app = typer.Typer(help="Documents by id: get, delete", no_args_is_help=True)
app.add_typer(docs_app, name="docs", rich_help_panel=SEARCH)


@contextmanager
def gateway_call() -> Iterator:
    """The gateway client; a refusal ends the command with its code and message (exit 2)."""
    from hybridsearch.client import HybridSearchError

    try:
        with gateway_client() as client:
            yield client
    except HybridSearchError as err:
        console.print(f"[red]{err.code().name}[/]: {escape(err.details() or '')}", soft_wrap=True)
        raise typer.Exit(2) from None


def call(method: Callable[..., T], *args) -> T:
    with gateway_call() as client:
        return method(client)(*args)


def print_json(message) -> None:
    print(json.dumps(MessageToDict(message, preserving_proto_field_name=True), indent=2))


def collections_table(response) -> Table:
    table = wrapping_table("collections", [name_column("collection"), "documents", "chunks", Column("engines", "left"),
                                           Column("language", "left"), Column("options", "left", ratio=1)])
    for c in response.collections:
        engines = ", ".join(f"{s.store}: {s.engine}" for s in c.stores)
        options = "; ".join(f"{key}={value}" for key, value in sorted(c.options.items()))
        table.add_row(escape(c.name), str(c.documents), str(c.chunks), escape(engines), c.language, escape(options))
    return table


@collections_app.callback()
def collections(ctx: typer.Context, as_json: Annotated[bool, typer.Option("--json")] = False):
    """The collections your key may read: documents, chunks, engines, language, declared options."""
    if ctx.invoked_subcommand is not None:
        return
    response = call(lambda client: client.list_collections)
    if as_json:
        print_json(response)
        return
    Console().print(collections_table(response))
    for notice in response.notices:
        console.print(f"[yellow]{escape(notice)}[/]", soft_wrap=True)


@collections_app.command("drop")
def drop(name: Annotated[str, typer.Argument(help="the collection to drop")],
         yes: Annotated[bool, typer.Option("--yes", help="no question asked")] = False):
    """Drop a collection: both stores, its page orders and expansions. Refused while a reconcile holds it."""
    if not yes:
        typer.confirm(f"Drop collection {name!r} and every document in it?", abort=True)
    response = call(lambda client: client.drop_collection, name)
    if response.existed:
        console.print(f"dropped {response.collection}: {response.documents} documents, {response.chunks} chunks, "
                      f"{response.cache_entries} cached entries")
    else:
        console.print(f"{response.collection} did not exist: nothing to drop")


def document_lines(doc) -> list[str]:
    lines = [f"[bold]{escape(doc.id)}[/]  [cyan]{escape(doc.title)}[/]"]
    lines += [f"  {escape(key)}: {escape(value)}" for key, value in sorted(doc.metadata.items())]
    lines += [f"  chunk {escape(c.chunk_id)} [{c.start}, {c.end})" + (f"  {escape(c.heading)}" if c.heading else "")
              for c in doc.chunks]
    return [*lines, "", escape(doc.text), ""]


@docs_app.command("get")
def docs_get(ids: Annotated[list[str], typer.Argument(help="document ids")],
             collection: Annotated[str, COLLECTION] = "default",
             as_json: Annotated[bool, typer.Option("--json")] = False):
    """Whole documents by id: title, metadata, chunk spans and text."""
    response = call(lambda client: client.get_documents, collection, ids)
    if as_json:
        print_json(response)
    else:
        out = Console(soft_wrap=True)
        for doc in response.documents:
            for line in document_lines(doc):
                out.print(line)
    if response.missing:
        console.print(f"[yellow]not in {collection}: {escape(', '.join(response.missing))}[/]", soft_wrap=True)
        raise typer.Exit(1)


@docs_app.command("delete")
def docs_delete(ids: Annotated[list[str], typer.Argument(help="document ids")],
                collection: Annotated[str, COLLECTION] = "default"):
    """Delete documents by id from both stores."""
    response = call(lambda client: client.delete, collection, ids)
    console.print(f"deleted {response.documents_deleted} of {len(ids)} documents from {collection}")


@app.command(rich_help_panel=SEARCH)
def stats(collection: Annotated[str, COLLECTION] = "default",
          as_json: Annotated[bool, typer.Option("--json")] = False):
    """A collection's documents and chunks in each store, and each engine's details."""
    response = call(lambda client: client.stats, collection)
    if as_json:
        print_json(response)
        return
    table = wrapping_table(f"stats: {response.collection}", [Column("store", "left"), Column("engine", "left"),
                                                              "documents", "chunks", Column("details", "left", ratio=1)])
    for s in response.stores:
        details = ", ".join(f"{key}={value}" for key, value in sorted(s.details.items()))
        table.add_row(s.store, escape(s.engine), str(s.documents), str(s.chunks), escape(details))
    Console().print(table)
