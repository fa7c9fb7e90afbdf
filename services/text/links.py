"""Links between documents, read at ingest: Markdown links to other documents, [[wiki]] links, and a
metadata field listing linked ids. Link expansion (`--graph`) follows them one hop from the top hits.

Document ids of a folder corpus are relative paths (`guide/setup.md`), so a Markdown link resolves
against its document's folder, as a browser would: `[setup](../guide/setup.md#install)` from
`notes/a.md` is `guide/setup.md`. A wiki link names a page, not a path: `[[Setup Guide]]` is kept as a
key (lowercase, no extension, spaces and underscores as '-') and matched at query time against each
document's own keys (its id's file name and its title), which is weaker evidence than an explicit link:
GNO weights explicit links above inferred ones.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import IntEnum

MAX_LINKS = 64  # per document: a link farm must not make every query's graph step expensive
MARKDOWN_LINK = re.compile(r"(?<!!)\[[^\]\n]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"\n]*\")?\s*\)")
WIKI_LINK = re.compile(r"\[\[([^\]\[|#\n]+)(?:#[^\]\[|\n]*)?(?:\|[^\]\[\n]*)?\]\]")
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")
KEY_SEPARATORS = re.compile(r"[\s_]+")
DOC_EXTENSIONS = (".md", ".markdown", ".mdx", ".txt", ".rst")


class LinkKind(IntEnum):
    EXPLICIT = 1  # a Markdown link to a document, or an id in the links metadata field
    WIKI = 2      # [[name]]: matched by name against ids' file names and titles


@dataclass(frozen=True)
class Links:
    explicit: tuple[str, ...] = ()  # document ids
    wiki: tuple[str, ...] = ()      # page keys (link_key)


def link_key(name: str) -> str:
    """A page name as wiki links match it: the file name without folder or extension, lowercase,
    spaces and underscores as '-'. `Guides/Setup_Guide.md` and `[[setup guide]]` share `setup-guide`."""
    base = posixpath.basename(name.strip().rstrip("/"))
    for ext in DOC_EXTENSIONS:
        if base.lower().endswith(ext):
            base = base[: -len(ext)]
            break
    return KEY_SEPARATORS.sub("-", base.strip().lower())


def page_keys(doc_id: str, title: str) -> tuple[str, ...]:
    """The keys a wiki link can reach a document by: its id's file name and its title."""
    keys = [link_key(doc_id)]
    if title.strip() and link_key(title) not in keys:
        keys.append(link_key(title))
    return tuple(k for k in keys if k)


def resolve(doc_id: str, target: str) -> str | None:
    """The document id a Markdown link target names, relative to `doc_id`'s folder; None for URLs,
    anchors within the page, and paths that climb out of the corpus."""
    target = target.split("#", 1)[0].split("?", 1)[0]
    if not target or SCHEME.match(target) or target.startswith("//"):
        return None
    path = target.lstrip("/") if target.startswith("/") else posixpath.join(posixpath.dirname(doc_id), target)
    path = posixpath.normpath(path)
    if path.startswith("../") or path in ("..", "."):
        return None
    return path


def extract_links(doc_id: str, text: str, metadata: Mapping[str, str], links_field: str = "links") -> Links:
    """The document's outgoing links, deduplicated in order of appearance, itself excluded, at most MAX_LINKS."""
    explicit: dict[str, None] = {}
    for value in metadata.get(links_field, "").split(","):
        if value.strip():
            explicit[value.strip()] = None
    for match in MARKDOWN_LINK.finditer(text):
        target = resolve(doc_id, match.group(1))
        if target:
            explicit[target] = None
    explicit.pop(doc_id, None)
    own = set(page_keys(doc_id, ""))
    wiki = {key: None for key in (link_key(m.group(1)) for m in WIKI_LINK.finditer(text)) if key and key not in own}
    ids = list(explicit)[:MAX_LINKS]
    return Links(explicit=tuple(ids), wiki=tuple(list(wiki)[: MAX_LINKS - len(ids)]))
