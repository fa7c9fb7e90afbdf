"""Tables wrap, never cut: `reconcile` at 80 columns once printed `colle…` for its first header."""

from __future__ import annotations

import re

import pytest
from rich.console import Console

from hybridsearch.cli.ops import RECONCILE_COLUMNS, reconcile_table
from hybridsearch.reconcile.run import Report

HEADER_WORDS = [w for c in RECONCILE_COLUMNS for w in (c if isinstance(c, str) else c.header).split()]


def rendered(table, width: int) -> str:
    console = Console(width=width, record=True, file=open("/dev/null", "w"))
    console.print(table)
    return console.export_text()


def report_rows(name: str) -> list[dict]:
    found = {"missing": 3, "diverged": 12, "torn": 0, "consistent": 48213}
    return [Report(name, {"bm25": 48228, "vector": 48225}, found, repaired=15, reingest=["d1"]).row()]


@pytest.mark.parametrize("name", ["scifact", "team-a-meeting-notes-2024"])
def test_reconcile_at_80_columns_shows_every_header_word_whole(name):
    text = rendered(reconcile_table(report_rows(name), dry_run=True), 80)
    assert "…" not in text and max(len(line) for line in text.splitlines()) <= 80
    words = set(re.findall(r"\S+", text))
    assert set(HEADER_WORDS) <= words, set(HEADER_WORDS) - words
    assert {"48228", "48225", "48213", "15"} <= words


@pytest.mark.parametrize("width", [60, 40, 24])
def test_a_narrow_terminal_folds_cells_and_loses_nothing(width):
    name = "team-a-meeting-notes-2024"
    text = rendered(reconcile_table(report_rows(name), dry_run=False), width)
    assert "…" not in text and max(len(line) for line in text.splitlines()) <= width
    lines = text.splitlines()
    body = [line for line in lines[next(i for i, line in enumerate(lines) if "──" in line) + 1:] if line.strip()]
    assert "".join(line.split()[0] for line in body) == name  # the first column, folded, reads whole


def test_the_collections_table_never_breaks_a_name_at_80_columns():
    from hybridsearch.cli.resources import collections_table
    from hybridsearch.v1 import collections_pb2, ingest_pb2

    listed = collections_pb2.ListCollectionsResponse()
    for name in ("team-notes-20269", "a-rather-long-collection-name-2026-11", "default"):
        c = listed.collections.add(name=name, documents=123456, chunks=234567, language="en",
                                   options={"boosts": '[{"field": "type", "value": "decision"}]', "fuzzy": "true"})
        c.stores.extend([ingest_pb2.StoreSummary(store="bm25", engine="embedded-tantivy"),
                         ingest_pb2.StoreSummary(store="vector", engine="qdrant-edge+minilm-fp32")])
    text = rendered(collections_table(listed), 80)
    assert "…" not in text and max(len(line) for line in text.splitlines()) <= 80
    words = set(re.findall(r"\S+", text))
    assert {"team-notes-20269", "a-rather-long-collection-name-2026-11", "default"} <= words  # each on one line
