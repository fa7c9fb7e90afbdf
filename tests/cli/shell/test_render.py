"""What the shell prints: the results table (numbered on, every column, fitted to the terminal), a
document, the collections and the help."""

from __future__ import annotations

import re

from rich.console import Console

from hybridsearch.cli.shell import render
from hybridsearch.cli.shell.catalog import CollectionSummary, Document
from hybridsearch.cli.shell.state import Page, State
from hybridsearch.v1 import search_pb2


def text_of(renderable, width: int = 100) -> str:
    console = Console(width=width, record=True, file=open("/dev/null", "w"))
    console.print(renderable)
    return console.export_text()


def second_page() -> Page:
    hits = [search_pb2.SearchHit(doc_id="notes/fusion.md", collection="notes", score=0.61 - i / 100,
                                 snippet="Reciprocal rank fusion\nmerges ranked lists by rank.",
                                 highlights=[search_pb2.Highlight(start=11, end=15)]) for i in range(3)]
    response = search_pb2.SearchResponse(hits=hits, offset=10, next_page_token="T", took_ms=12,
                                         counts=search_pb2.ResultCounts(line="Reranked 0 of 40, returned 3"))
    return Page("rank fusion", State().request("rank fusion"), response)


def test_the_results_table_has_its_columns_and_numbers_on():
    text = text_of(render.results(second_page()))
    header = next(line for line in text.splitlines() if line.split()[:2] == ["rank", "score"])
    assert header.split() == ["rank", "score", "collection", "type", "where", "preview"]
    ranks = [line.split()[0] for line in text.splitlines() if re.match(r"\s*\d+\s+0\.\d{3}", line)]
    assert ranks == ["11", "12", "13"]
    assert "notes/fusion.md" in text and " md " in text and "Reranked 0 of 40, returned 3" in text
    assert "Reciprocal rank fusion merges" in text  # the snippet's newline folded into one paragraph
    assert "more: :next" in text


def test_a_row_cites_its_lines_and_symbol_and_the_neighbours_follow_the_table():
    page = second_page()
    hit = page.response.hits[0]
    hit.path = "src/fusion.py"
    hit.citation.chunk.start_line, hit.citation.chunk.end_line = 12, 30
    hit.metadata["symbol"] = "rrf_merge"
    hit.context_after.add(chunk_id="notes/fusion.md#1", text="The constant k damps the top ranks.")
    text = " ".join(text_of(render.results(page), 140).split())
    assert "src/fusion.py:12-30 (rrf_merge)" in text  # what `query` prints as the hit's source line
    assert "11. after (notes/fusion.md#1): The constant k damps the top ranks." in text


def test_the_results_table_wraps_at_80_columns_and_cuts_nothing():
    text = text_of(render.results(second_page()), 80)
    assert "…" not in text and max(len(line) for line in text.splitlines()) <= 80
    words = " ".join(text.split())
    assert "merges ranked lists by rank." in words


def test_highlights_are_marked():
    console = Console(width=100, record=True, force_terminal=True, file=open("/dev/null", "w"))
    console.print(render.preview(second_page().response.hits[0]))
    assert "\x1b[1;33mrank\x1b[0m" in console.export_text(styles=True)


def test_a_document_and_the_collections():
    doc = text_of(render.document(Document("d1", "Fusion", "Whole text.", {"lang": "en"}), "a note"))
    assert doc.splitlines()[:4] == ["Fusion  (d1)", "lang=en", "a note", "Whole text."]
    table = text_of(render.collections([CollectionSummary("notes", 12, 40, "en")]))
    assert re.search(r"notes\s+12\s+40\s+en", table)


def test_help_lists_every_command():
    text = text_of(render.help_table())
    for command in (":next", ":explain", ":mode", ":effort", ":filter", ":use", ":open N", ":collections", ":help", ":quit"):
        assert command in text
