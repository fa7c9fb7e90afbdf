"""Markdown: YAML front matter (python-frontmatter) becomes the document's metadata (tags, title, dates, any
flat field) instead of text; the title is the front matter's, else the first `# ` heading, else the name.
The text is what follows the front matter, and its source offsets say where it starts in the file."""

from __future__ import annotations

from collections.abc import Iterator

import frontmatter

from hybridsearch.readers.acl_files import parse_acl_entries
from hybridsearch.readers.base import SourceFile, markdown_title, metadata
from hybridsearch.v1 import ingest_pb2


def split_front_matter(text: str) -> tuple[dict, str, int]:
    """(front matter, body, the body's offset in `text`); a text without front matter is all body."""
    fields, body = frontmatter.parse(text)
    if not fields and body.strip() == text.strip():
        return {}, text, 0
    start = text.rfind(body) if body else len(text)  # the body is the text's tail, less surrounding space
    return dict(fields), body, max(start, 0)


class MarkdownReader:
    def read(self, source: SourceFile) -> Iterator[ingest_pb2.Document]:
        raw = source.text()
        fields, body, start = split_front_matter(raw)
        title = str(fields.pop("title", "") or "") or markdown_title(body, source.path.stem)
        readers = fields.pop("acl", None)  # its readers (readers/acl_files.py), not metadata
        yield ingest_pb2.Document(
            id=source.doc_id, title=title, text=body, metadata=metadata(source.fields(), fields),
            source_line_offset=raw.count("\n", 0, start), source_char_offset=start,
            acl=parse_acl_entries(readers, f"{source.path.name}: front matter acl") if readers is not None else None,
        )
