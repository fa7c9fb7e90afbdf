"""JSON and JSON Lines: each record (an object, each element of a top-level list, each line of a .jsonl)
is a document. A field map says which fields are its id, title, text and metadata; by default the first of
`id`/`_id`, `title`/`name`, `text`/`body`/`content` that a record has, and its `metadata` object or else
every other flat field. A record without an id is `<path>:<n>`."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass

from hybridsearch.readers.base import SAFE_ID, SourceFile, metadata, value_text
from hybridsearch.v1 import ingest_pb2


@dataclass(frozen=True)
class FieldMap:
    id: tuple[str, ...] = ("id", "_id")
    title: tuple[str, ...] = ("title", "name")
    text: tuple[str, ...] = ("text", "body", "content")
    metadata: tuple[str, ...] = ("metadata",)  # an object of fields; none: the record's other flat fields

    @classmethod
    def parse(cls, items: list[str]) -> "FieldMap":
        """`role=field` items (`--field-map text=abstract`): each names the record field of that role."""
        roles = {}
        for item in items:
            role, sep, name = item.partition("=")
            if not sep or role not in cls.__dataclass_fields__ or not name:
                raise ValueError(f"{item!r}: expected ROLE=FIELD, ROLE one of {', '.join(cls.__dataclass_fields__)}")
            roles[role] = (name,)
        return cls(**roles)

    def first(self, record: dict, names: tuple[str, ...]) -> str:
        return next((value_text(record[n]) or "" for n in names if n in record), "")


def records(source: SourceFile) -> Iterator[dict]:
    text = source.text()
    if source.suffix == ".jsonl":
        rows = (json.loads(line) for line in text.splitlines() if line.strip())
    else:
        data = json.loads(text)
        rows = data if isinstance(data, list) else [data]
    yield from (row for row in rows if isinstance(row, dict))


class JsonReader:
    def __init__(self, fields: FieldMap = FieldMap()) -> None:
        self.fields = fields

    def read(self, source: SourceFile) -> Iterator[ingest_pb2.Document]:
        f = self.fields
        named = {*f.id, *f.title, *f.text, *f.metadata}
        for n, record in enumerate(records(source)):
            title, text = f.first(record, f.title), f.first(record, f.text)
            if not (title.strip() or text.strip()):
                continue
            own = next((record[m] for m in f.metadata if isinstance(record.get(m), dict)), None)
            extra = own if own is not None else {k: v for k, v in record.items() if k not in named}
            doc_id = SAFE_ID.sub("_", f.first(record, f.id)) or f"{source.doc_id}:{n}"
            yield ingest_pb2.Document(id=doc_id[:256], title=title, text=text,
                                      metadata=metadata(source.fields(), extra))
