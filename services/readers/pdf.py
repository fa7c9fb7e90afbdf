"""PDF (pypdf): the text of every page, one section a page (a chunk never spans two; each carries `page`),
titled by the document's title, else the file's name."""

from __future__ import annotations

from collections.abc import Iterator

from pypdf import PdfReader

from hybridsearch.readers.base import SourceFile, metadata
from hybridsearch.v1 import ingest_pb2


class PdfReaderOfFiles:
    def read(self, source: SourceFile) -> Iterator[ingest_pb2.Document]:
        pdf = PdfReader(source.path)
        parts, sections, offset = [], [], 0
        for number, page in enumerate(pdf.pages, 1):
            text = (page.extract_text() or "").strip()
            if text:
                sections.append(ingest_pb2.DocumentSection(start=offset, end=offset + len(text),
                                                           metadata={"page": str(number)}))
                parts.append(text)
                offset += len(text) + 2
        info = pdf.metadata or {}
        title = str(info.get("/Title") or "") or source.path.stem
        if parts:
            yield ingest_pb2.Document(id=source.doc_id, title=title, text="\n\n".join(parts), sections=sections,
                                      metadata=metadata(source.fields(), {"author": info.get("/Author")}))
