"""What the shell prints, as rich renderables: the results table (rank, score, collection, type, path,
preview), the explanation, a document, the collections, the help. Tables wrap to the terminal's width
(cli.tables): a narrow terminal folds a preview, it never cuts one."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.markup import escape
from rich.text import Text

from hybridsearch.cli.search import citation, context_lines, highlighted
from hybridsearch.cli.shell.catalog import CollectionSummary, Document
from hybridsearch.cli.shell.commands import PREFIX, SPECS
from hybridsearch.cli.shell.state import Page
from hybridsearch.cli.tables import Column, wrapping_table
from hybridsearch.client import explain_lines
from hybridsearch.v1 import search_pb2

RESULT_COLUMNS = (Column("rank"), Column("score"), Column("collection", "left"), Column("type", "left"),
                  Column("where", "left"), Column("preview", "left", ratio=1))


def hit_field(hit: search_pb2.SearchHit, name: str) -> str:
    """A SearchHit field this build may not have yet (path, type: the folder readers' fields), else ""."""
    return getattr(hit, name, "") if name in hit.DESCRIPTOR.fields_by_name else ""


def hit_place(hit: search_pb2.SearchHit) -> str:
    """The hit's citation as `query` prints it (path:lines (symbol)), else its path or id."""
    return citation(hit) or hit.doc_id


def hit_type(hit: search_pb2.SearchHit) -> str:
    if kind := hit_field(hit, "type"):
        return kind
    suffix = hit.doc_id.rpartition(".")[2] if "." in hit.doc_id.rpartition("/")[2] else ""
    return suffix.lower()


def preview(hit: search_pb2.SearchHit) -> Text:
    """The snippet with its highlights, on one paragraph (a newline becomes a space: offsets hold)."""
    return Text.from_markup(highlighted(hit.snippet.replace("\n", " ").replace("\r", " "), hit.highlights))


def results(page: Page) -> RenderableType:
    r = page.response
    counts = r.counts.line or f"{r.total_candidates} candidates"
    title = f"{escape(page.query)}  ({r.took_ms:.0f} ms, {escape(counts)}{', DEGRADED' if r.degraded else ''})"
    if not r.hits:
        return Text.from_markup(f"{title}\nno hits")
    table = wrapping_table(title, RESULT_COLUMNS)
    for number, hit in enumerate(r.hits, page.first):
        table.add_row(str(number), f"{hit.score:.3f}", escape(hit.collection), escape(hit_type(hit)),
                      escape(hit_place(hit)), preview(hit))
    notes = [f"{number}. {escape(line)}" for number, hit in enumerate(r.hits, page.first) for line in context_lines(hit)]
    notes += [f"notice: {escape(n)}" for n in r.notices]
    if r.next_page_token:
        notes.append(f"more: {PREFIX}next")
    return Group(table, *(Text.from_markup(n) for n in notes))


def explanation(response: search_pb2.SearchResponse) -> RenderableType:
    lines = explain_lines(response)
    if response.HasField("explain") and response.explain.fusion_order:
        lines.append(f"fusion order: {', '.join(response.explain.fusion_order[:10])}")
    return Text("\n".join(lines))


def document(doc: Document, note: str = "") -> RenderableType:
    head = f"[bold]{escape(doc.title or doc.id)}[/]  ({escape(doc.id)})"
    meta = "  ".join(f"{escape(k)}={escape(v)}" for k, v in sorted(doc.metadata.items()))
    parts = [Text.from_markup(head)]
    if meta:
        parts.append(Text(meta, style="dim"))
    if note:
        parts.append(Text(note, style="yellow"))
    parts.append(Text(doc.text))
    return Group(*parts)


def collections(rows: list[CollectionSummary]) -> RenderableType:
    table = wrapping_table("collections", (Column("name", "left"), "documents", "chunks", Column("language", "left")))
    for c in rows:
        table.add_row(escape(c.name), str(c.documents), str(c.chunks), escape(c.language))
    return table


def help_table() -> RenderableType:
    table = wrapping_table("type a query to search; commands:", (Column("command", "left"), Column("what", "left", ratio=1)))
    for command, spec in SPECS.items():
        table.add_row(escape(f"{PREFIX}{command.value} {spec.usage}".rstrip()), spec.help)
    return table


def error(message: str) -> RenderableType:
    return Text(message, style="red")


def note(message: str) -> RenderableType:
    return Text(message, style="cyan")
