"""One set of documents with readers, and who reads which, for every engine's test of document readers
(security/acl.py): each engine filters inside its own search, so each is checked against the same answers."""

from __future__ import annotations

from hybridsearch.security.acl import parse_acl
from hybridsearch.text.chunking import content_hash
from hybridsearch.v1 import common_pb2

# doc id -> (acl entries or None for the collection's default, its own word)
DOCS = {
    "d-eng": (["group:eng"], "gearbox"),
    "d-hr": (["group:hr"], "payroll"),
    "d-sec": (["group:eng", "!user:bob"], "obsidian"),
    "d-pub": (["*"], "meadow"),
    "d-def": (None, "quarry"),
}
ANA = common_pb2.Readers(principals=["group:eng", "user:ana"], default_readable=True)
BOB = common_pb2.Readers(principals=["group:eng", "group:hr", "user:bob"])
NOBODY = common_pb2.Readers()
READS = {"ana": (ANA, {"d-eng", "d-sec", "d-pub", "d-def"}), "bob": (BOB, {"d-eng", "d-hr", "d-pub"}),
         "nobody": (NOBODY, {"d-pub"}), "everyone": (None, set(DOCS))}


def acl_of(doc_id: str) -> common_pb2.Acl | None:
    entries = DOCS[doc_id][0]
    return parse_acl(entries) if entries is not None else None


def chunks(acls: dict[str, common_pb2.Acl | None] | None = None, tags: bool = False) -> list[common_pb2.Chunk]:
    """Two chunks a document, every one holding the shared words and its document's own word; `acls` overrides."""
    out = []
    for doc_id, (_, word) in DOCS.items():
        text = f"lighthouse keepers log the {word} entries"
        acl = (acls or {}).get(doc_id, acl_of(doc_id))
        for position in range(2):
            out.append(common_pb2.Chunk(
                chunk_id=f"{doc_id}#{position}", doc_id=doc_id, position=position, title=f"{word} notes",
                text=f"{text} part {position}", content_hash=content_hash("", text, {}),
                metadata={"tags": f"{word},harbor", "links": "d-pub" if doc_id != "d-pub" else "d-hr"}
                if tags else {}, acl=acl))
    return out


def docs_of(hits) -> set[str]:
    return {h.doc_id for h in hits}
