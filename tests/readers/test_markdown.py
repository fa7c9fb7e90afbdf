"""Markdown: front matter is metadata, not text; spans still count the file's lines."""

from hybridsearch.readers.base import SourceFile
from hybridsearch.readers.markdown import MarkdownReader

NOTE = """---
title: Choosing Postgres
tags: [postgres, database]
type: decision
date: 2024-03-05
reviewers:
  lead: ann
---

# Ignored heading title

We chose Postgres for its JSONB support.
"""


def test_front_matter_becomes_title_and_metadata(tmp_path):
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "db.md").write_text(NOTE)
    [doc] = MarkdownReader().read(SourceFile(tmp_path / "notes" / "db.md", tmp_path))
    assert doc.id == "notes/db.md" and doc.title == "Choosing Postgres"
    assert "---" not in doc.text and "tags" not in doc.text and doc.text.startswith("# Ignored heading title")
    meta = dict(doc.metadata)
    assert meta["tags"] == "postgres, database" and meta["date"] == "2024-03-05"
    assert meta["path"] == "notes/db.md" and meta["type"] == "md" and meta["folder"] == "notes"
    assert meta["modified"].endswith("+00:00") and "reviewers" not in meta  # a mapping has no flat form
    # The body starts on the file's line 10 (after 8 lines of front matter and a blank line).
    assert doc.source_line_offset == 9 and NOTE[doc.source_char_offset:].startswith("# Ignored")


def test_without_front_matter_the_title_is_the_first_heading_or_the_name(tmp_path):
    (tmp_path / "a.md").write_text("intro\n\n# Real title\n\ntext\n")
    (tmp_path / "b.markdown").write_text("no heading --- here\n")
    [a] = MarkdownReader().read(SourceFile(tmp_path / "a.md", tmp_path))
    [b] = MarkdownReader().read(SourceFile(tmp_path / "b.markdown", tmp_path))
    assert (a.title, a.source_char_offset, a.text) == ("Real title", 0, "intro\n\n# Real title\n\ntext\n")
    assert b.title == "b" and b.text == "no heading --- here\n"
