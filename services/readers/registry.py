"""Which reader reads a file: a table from extension to reader. Readers load on first use, so a missing
library (the `readers` extra not installed) leaves only its own kinds of file unread."""

from __future__ import annotations

import importlib
from enum import Enum
from functools import cache

from hybridsearch.readers.base import Reader

INSTALL_READERS = "pip install 'hybridsearch[readers]'"


class Kind(Enum):
    """A reader: (module, class) under hybridsearch.readers."""

    MARKDOWN = ("markdown", "MarkdownReader")
    TEXT = ("text", "TextReader")
    RST = ("rst", "RstReader")
    HTML = ("html", "HtmlReader")
    JSON = ("jsondocs", "JsonReader")
    CODE = ("code", "CodeReader")
    PDF = ("pdf", "PdfReaderOfFiles")


READERS: dict[str, Kind] = {
    ".md": Kind.MARKDOWN, ".markdown": Kind.MARKDOWN,
    ".txt": Kind.TEXT, ".text": Kind.TEXT,
    ".rst": Kind.RST,
    ".html": Kind.HTML, ".htm": Kind.HTML,
    ".json": Kind.JSON, ".jsonl": Kind.JSON,
    ".py": Kind.CODE, ".go": Kind.CODE, ".java": Kind.CODE, ".js": Kind.CODE, ".mjs": Kind.CODE, ".cjs": Kind.CODE,
    ".jsx": Kind.CODE, ".ts": Kind.CODE, ".tsx": Kind.CODE, ".sh": Kind.CODE, ".bash": Kind.CODE, ".rs": Kind.CODE,
    ".c": Kind.CODE, ".h": Kind.CODE, ".cc": Kind.CODE, ".cpp": Kind.CODE, ".cxx": Kind.CODE, ".hpp": Kind.CODE,
    ".hh": Kind.CODE, ".hxx": Kind.CODE, ".cs": Kind.CODE, ".rb": Kind.CODE,
    ".pdf": Kind.PDF,
}


class ReaderMissing(RuntimeError):
    """A reader whose library is not installed."""


@cache
def reader_class(kind: Kind) -> type:
    module, name = kind.value
    try:
        return getattr(importlib.import_module(f"hybridsearch.readers.{module}"), name)
    except ModuleNotFoundError as err:
        raise ReaderMissing(f"{kind.name.lower()} files need {err.name}: {INSTALL_READERS}") from err


def reader(kind: Kind, **options) -> Reader:
    """The reader of this kind; `options` go to the readers that take them (JSON: fields=FieldMap)."""
    cls = reader_class(kind)
    return cls(**options) if options and kind is Kind.JSON else cls()
