"""What every reader shares: the file it reads, the interface it keeps, and metadata that stays in the limits."""

from __future__ import annotations

import datetime as dt
import hashlib
import re
import urllib.parse
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from hybridsearch.contract.limits import MAX_DOC_ID_CHARS, MAX_METADATA_BYTES, MAX_METADATA_KEYS, MAX_VALUE_CHARS
from hybridsearch.contract.validation import FIELD_NAME
from hybridsearch.v1 import ingest_pb2

# A character an id keeps as it is; every other one (whitespace, '#', '%', control characters, ...) is written
# as its UTF-8 bytes in %XX, as URLs do, so two names never give one id and `unquote` gives the name back.
ESCAPED = re.compile(r"[^\w./-]")
HASHED_TAIL = 17  # an id too long for the stores: its head, "~" and 16 hex digits of the whole name's sha256
NOT_KEY = re.compile(r"[^A-Za-z0-9_-]+")


@dataclass(frozen=True)
class SourceFile:
    """A file of the folder being indexed."""

    path: Path
    root: Path

    @property
    def rel(self) -> str:
        return self.path.relative_to(self.root).as_posix()

    @property
    def suffix(self) -> str:
        return self.path.suffix.lower()

    @property
    def doc_id(self) -> str:
        return escaped_id(self.rel)

    def text(self) -> str:
        return self.path.read_text(encoding="utf-8", errors="replace")

    def fields(self) -> dict[str, str]:
        """What every document of this file carries: path, type (the extension), folder, modified (UTC, ISO 8601)."""
        modified = dt.datetime.fromtimestamp(self.path.stat().st_mtime, dt.UTC).isoformat(timespec="seconds")
        return {"path": self.rel, "type": self.suffix.lstrip("."), "folder": self.path.parent.relative_to(self.root).as_posix(),
                "modified": modified}


def escaped_id(name: str) -> str:
    """A document id made from a name (a relative path, a JSON record's id): reversible (urllib.parse.unquote)
    while it fits the stores' MAX_DOC_ID_CHARS; a longer one is cut and ends in a hash of the whole name, so
    that two long names sharing a head still differ."""
    escaped = ESCAPED.sub(lambda m: urllib.parse.quote(m.group(), safe="", errors="surrogateescape"), name)
    if len(escaped) <= MAX_DOC_ID_CHARS:
        return escaped
    digest = hashlib.sha256(name.encode("utf-8", "surrogateescape")).hexdigest()[:HASHED_TAIL - 1]
    return f"{escaped[:MAX_DOC_ID_CHARS - HASHED_TAIL]}~{digest}"


class Reader(Protocol):
    """Reads one file into the documents to index (most files are one document; a JSON file may hold many)."""

    def read(self, source: SourceFile) -> Iterator[ingest_pb2.Document]: ...


def value_text(value: Any) -> str | None:
    """A metadata value as the stores keep it (a string), or None for what has no flat form (a mapping)."""
    if value is None or isinstance(value, Mapping):
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dt.date, dt.datetime)):
        return value.isoformat()
    if isinstance(value, (list, tuple, set)):
        parts = [value_text(v) for v in value]
        return ", ".join(p for p in parts if p)
    return str(value)


def metadata(fields: Mapping[str, str], extra: Mapping[str, Any]) -> dict[str, str]:
    """The file's fields, then a reader's (front matter, a JSON record's): keys made valid ([A-Za-z0-9_-]),
    values flattened and cut to the stores' limits; what does not fit (keys, bytes) is left out."""
    out = dict(fields)
    size = sum(len(k.encode()) + len(v.encode()) for k, v in out.items())
    for raw_key, raw_value in extra.items():
        key, value = NOT_KEY.sub("_", str(raw_key)).strip("_")[:64], value_text(raw_value)
        if not value or not FIELD_NAME.fullmatch(key) or key in fields:
            continue
        value = value[:MAX_VALUE_CHARS]
        grown = len(key.encode()) + len(value.encode())
        if len(out) >= MAX_METADATA_KEYS or size + grown > MAX_METADATA_BYTES:
            break
        out[key], size = value, size + grown
    return out


def markdown_title(text: str, default: str) -> str:
    """The first `# ` heading of a Markdown text, else `default`."""
    return next((line.lstrip("#").strip() for line in text.splitlines() if line.startswith("# ")), default)
