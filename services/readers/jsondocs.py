"""JSON and JSON Lines: each record (an object, each element of a top-level list, each line of a .jsonl)
is a document. A field map says which fields are its id, title, text and metadata; by default the first of
`id`/`_id`, `title`/`name`, `text`/`body`/`content` that a record has, and its `metadata` object or else
every other flat field. A record without an id is `<path>:<n>`.

A record that cannot be a document is skipped and said (`JsonReader.skips`, each with its line for JSON
Lines): a line that is not JSON or not an object, a record with none of the text and title fields (named:
a `--field-map text=abstract` that no record has shows here, not as a silent empty index)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass

from hybridsearch.readers.base import SourceFile, escaped_id, metadata, value_text
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


@dataclass(frozen=True)
class RecordSkip:
    """A record left out: where (`path line 3`, `path record 2`) and why."""

    where: str
    reason: str
    bad_json: bool = False  # the line is not a JSON object (else: it is one with nothing to index)


@dataclass(frozen=True)
class Record:
    where: str  # `path line 3` (JSON Lines), `path record 2` (a list), `path` (one object)
    n: int
    row: object


def records(source: SourceFile) -> Iterator[Record]:
    """Every record of the file; a .jsonl line that is not JSON is a Record whose row is the JSONDecodeError."""
    text = source.text()
    if source.suffix == ".jsonl":
        n = 0
        for number, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as err:
                row = err
            yield Record(f"{source.rel} line {number}", n, row)
            n += 1
        return
    data = json.loads(text)
    rows = data if isinstance(data, list) else [data]
    for n, row in enumerate(rows):
        yield Record(f"{source.rel} record {n + 1}" if isinstance(data, list) else source.rel, n, row)


class JsonReader:
    def __init__(self, fields: FieldMap = FieldMap()) -> None:
        self.fields = fields
        self.skips: list[RecordSkip] = []  # of the last file read

    def read(self, source: SourceFile) -> Iterator[ingest_pb2.Document]:
        f = self.fields
        named = {*f.id, *f.title, *f.text, *f.metadata}
        self.skips = []
        for record in records(source):
            row = record.row
            if isinstance(row, json.JSONDecodeError):
                self.skips.append(RecordSkip(record.where, f"not JSON ({row.msg}, column {row.colno})", True))
                continue
            if not isinstance(row, dict):
                self.skips.append(RecordSkip(record.where, f"a JSON {type(row).__name__}, not an object", True))
                continue
            title, text = f.first(row, f.title), f.first(row, f.text)
            if not (title.strip() or text.strip()):
                self.skips.append(RecordSkip(record.where, f"no text: none of the fields {', '.join(f.text + f.title)}"))
                continue
            own = next((row[m] for m in f.metadata if isinstance(row.get(m), dict)), None)
            extra = own if own is not None else {k: v for k, v in row.items() if k not in named}
            given = f.first(row, f.id)
            doc_id = escaped_id(given) if given else f"{source.doc_id}:{record.n}"
            yield ingest_pb2.Document(id=doc_id, title=title, text=text, metadata=metadata(source.fields(), extra))
