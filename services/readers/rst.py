"""reStructuredText (docutils): the document title and its bibliographic fields (`:tags:`, `:date:`, any
other field list at the top) become the title and metadata; the text is the file's source, so that hits
cite its lines."""

from __future__ import annotations

from collections.abc import Iterator

from docutils import nodes
from docutils.core import publish_doctree

from hybridsearch.readers.base import SourceFile, metadata
from hybridsearch.v1 import ingest_pb2

QUIET = {"report_level": 5, "halt_level": 5, "warning_stream": False, "file_insertion_enabled": False,
         "raw_enabled": False}


def docinfo(tree: nodes.document) -> dict[str, str]:
    """The document's bibliographic fields: standard ones (author, date, ...) and generic `:name: value`."""
    out: dict[str, str] = {}
    for info in tree.findall(nodes.docinfo):
        for child in info.children:
            if isinstance(child, nodes.field):
                out[child[0].astext()] = child[1].astext()
            elif isinstance(child, nodes.Element):
                out[child.tagname] = child.astext()
    return out


class RstReader:
    def read(self, source: SourceFile) -> Iterator[ingest_pb2.Document]:
        text = source.text()
        tree = publish_doctree(text, source_path=str(source.path), settings_overrides=QUIET)
        title = tree.get("title") or next((t.astext() for t in tree.findall(nodes.title)), "") or source.path.stem
        yield ingest_pb2.Document(id=source.doc_id, title=title, text=text,
                                  metadata=metadata(source.fields(), docinfo(tree)))
