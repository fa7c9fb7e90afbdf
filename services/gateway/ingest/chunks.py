"""What each store is sent for a batch of documents: their chunks (a reader's sections, else text chunking), each
with its span in the source file and the document's content hash; sealed, and their words hashed for BM25, where
the collection is (docs/architecture.md, the path of a write)."""

from __future__ import annotations

import bisect
import re
import time

from hybridsearch.config.settings import Settings
from hybridsearch.security.hashed_terms import HashedTerms, hashes_terms
from hybridsearch.security.sealing import CollectionSeal
from hybridsearch.text.chunking import chunk_lines, chunk_text, content_hash
from hybridsearch.v1 import common_pb2, ingest_pb2

NEWLINE = re.compile("\n")


def document_chunks(doc: ingest_pb2.Document, words: int, overlap: int, tag: str = "",
                    written_at_ms: int = 0) -> list[common_pb2.Chunk]:
    """The document's chunks of `words` words (its sections' when a reader gave some); `tag` keeps a store's
    own chunk ids apart from the shared ones; `written_at_ms` stamps the write (reconcile keeps the newer of two
    diverged versions). Each chunk knows its span in the source file."""
    metadata = dict(doc.metadata)
    digest = content_hash(doc.title, doc.text, metadata, *layout(doc))
    lines = SourceLines(doc.text, doc.source_line_offset, doc.source_char_offset)
    return [
        common_pb2.Chunk(
            chunk_id=f"{doc.id}#{tag}{position}", doc_id=doc.id, position=position, title=doc.title,
            heading=heading, text=text, metadata={**metadata, **extra}, content_hash=digest,
            written_at_ms=written_at_ms, span=lines.span(start, end), acl=doc.acl if doc.HasField("acl") else None,
        )
        for position, (heading, text, start, end, extra) in enumerate(_pieces(doc, words, overlap))
    ]


def layout(doc: ingest_pb2.Document) -> list[str]:
    """What a reader said of the text's layout (sections, source offsets), for the content hash: nothing for a
    document without, so that the hashes of documents written before readers gave layouts stay the same."""
    offsets = [f"+{doc.source_line_offset}:{doc.source_char_offset}"] if doc.source_line_offset or doc.source_char_offset else []
    return [s.SerializeToString(deterministic=True).hex() for s in doc.sections] + offsets


def _pieces(doc: ingest_pb2.Document, words: int, overlap: int):
    """(heading, text, start, end, section metadata) of each chunk, in order."""
    if not doc.sections:
        for piece in chunk_text(doc.text, words, overlap):
            yield piece.heading, piece.text, piece.start, piece.end, {}
        return
    for section in doc.sections:
        for span in chunk_lines(doc.text, section.start, section.end, words):
            yield section.heading, span.text, span.start, span.end, dict(section.metadata)


class SourceLines:
    """Lines and characters of a document's text counted from the top of its source file."""

    def __init__(self, text: str, line_offset: int = 0, char_offset: int = 0) -> None:
        self.breaks = [m.start() for m in NEWLINE.finditer(text)]  # scanned in C: a text is 100k characters
        self.line_offset, self.char_offset = line_offset, char_offset

    def line(self, index: int) -> int:
        """The 1-based source line of the text's character at `index`."""
        return bisect.bisect_left(self.breaks, index) + 1 + self.line_offset

    def span(self, start: int, end: int) -> common_pb2.SourceSpan:
        return common_pb2.SourceSpan(start_char=start + self.char_offset, end_char=end + self.char_offset,
                                     start_line=self.line(start), end_line=self.line(max(start, end - 1)))


def store_requests(collection: str, documents: list[ingest_pb2.Document], settings: Settings,
                   seal: CollectionSeal | None = None,
                   terms: HashedTerms | None = None) -> tuple[common_pb2.UpsertChunksRequest, common_pb2.UpsertChunksRequest]:
    """What each store is sent: the shared chunks, or the vector leg's own passages when configured; a sealed
    collection's chunks sealed (`seal`: security/sealing.py), and a hashed-terms collection's BM25 chunks with
    their words as keyed hashes (`terms`: security/hashed_terms.py; the vector store embeds the clear texts)."""
    now_ms = time.time_ns() // 1_000_000
    sealed = seal.seal_chunk if seal is not None else (lambda chunk: chunk)
    shared = [sealed(c) for d in documents
              for c in document_chunks(d, settings.chunk_words, settings.chunk_overlap_words, written_at_ms=now_ms)]
    request = common_pb2.UpsertChunksRequest(collection=collection, chunks=shared)
    bm25 = request
    if hashes_terms(seal):
        bm25 = common_pb2.UpsertChunksRequest(collection=collection,
                                              chunks=(terms or HashedTerms(settings.bm25)).chunks(seal, shared))
    words = settings.vector.chunk_words
    if not words or words == settings.chunk_words:
        return bm25, request
    passages = [sealed(c) for d in documents
                for c in document_chunks(d, words, settings.vector.chunk_overlap_words, "p", written_at_ms=now_ms)]
    return bm25, common_pb2.UpsertChunksRequest(collection=collection, chunks=passages)
