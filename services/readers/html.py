"""HTML (selectolax, its lexbor engine): the visible text of the page (no scripts, styles, templates), its <title> (else its
first <h1>), and its description and keywords (as tags) from <meta>. Spans count in the visible text."""

from __future__ import annotations

import re
from collections.abc import Iterator

from selectolax.lexbor import LexborHTMLParser as HTMLParser

from hybridsearch.readers.base import SourceFile, metadata
from hybridsearch.v1 import ingest_pb2

INVISIBLE = ["script", "style", "noscript", "template", "head", "svg"]
BLANK_LINES = re.compile(r"\n\s*\n\s*")


def visible_text(tree: HTMLParser) -> str:
    tree.strip_tags(INVISIBLE)
    root = tree.body or tree.root
    if root is None:
        return ""
    lines = (" ".join(line.split()) for line in root.text(separator="\n").splitlines())
    return BLANK_LINES.sub("\n\n", "\n".join(lines)).strip()


class HtmlReader:
    def read(self, source: SourceFile) -> Iterator[ingest_pb2.Document]:
        tree = HTMLParser(source.text())
        title_node = tree.css_first("title") or tree.css_first("h1")
        title = " ".join(title_node.text().split()) if title_node else ""
        meta = {m.attributes.get("name", "").lower(): m.attributes.get("content") or ""
                for m in tree.css("meta[name]")}
        extra = {"description": meta.get("description"), "tags": meta.get("keywords"), "author": meta.get("author")}
        text = visible_text(tree)
        if text or title:
            yield ingest_pb2.Document(id=source.doc_id, title=title or source.path.stem, text=text,
                                      metadata=metadata(source.fields(), extra))
