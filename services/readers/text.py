"""Plain text: the whole file, titled by its name."""

from __future__ import annotations

from collections.abc import Iterator

from hybridsearch.readers.base import SourceFile
from hybridsearch.v1 import ingest_pb2


class TextReader:
    def read(self, source: SourceFile) -> Iterator[ingest_pb2.Document]:
        yield ingest_pb2.Document(id=source.doc_id, title=source.path.stem, text=source.text(), metadata=source.fields())
