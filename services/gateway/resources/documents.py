"""GetDocuments: whole documents by id, rebuilt from the chunks the BM25 store keeps.

The stores keep chunks, not the text a client sent: `assemble` puts a document back together from its
chunks in order. Chunking (text/chunking.py) strips markdown heading lines into each chunk's heading
path, and starts a chunk that continues a section with the last `chunk_overlap_words` words of the one
before it, then a blank line: the text here writes each heading path where it changes as a heading line
and leaves the repeated words out, and each chunk's span says where it sits in that text (a span may begin
inside the previous chunk's: the overlap).

A sealed collection's chunks (security/sealing.py) are opened here, in the gateway, with the collection's key:
the caller the access check let read the collection gets the clear text, title and metadata; without a key
the call is FAILED_PRECONDITION with the reason, never sealed bytes. The content hash stays the keyed one
the stores hold.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import grpc

from hybridsearch.contract.limits import MAX_GET_IDS
from hybridsearch.security.acl import acl_readable
from hybridsearch.security.sealing import Sealer
from hybridsearch.storage.stores import chunks_by_document
from hybridsearch.contract.validation import check_collection, check_doc_ids
from hybridsearch.contract.errors import InvalidArgument, Refusal
from hybridsearch.gateway.backends import Backends
from hybridsearch.gateway.resources.catalog import Catalog
from hybridsearch.v1 import collections_pb2, common_pb2

GET_TIMEOUT_S = 30.0
BLOCK_SEP = "\n\n"
WORD = re.compile(r"\S+")


def heading_line(path: str) -> str:
    """A heading path ("Install > Linux") as the markdown heading line it came from ("## Linux")."""
    parts = path.split(" > ")
    return f"{'#' * min(len(parts), 6)} {parts[-1]}"


def repeated_tail(previous: str, text: str, overlap_words: int) -> int:
    """How many of `previous`'s last words `text` starts with as chunking's overlap (0: none)."""
    if overlap_words <= 0:
        return 0
    words = previous.split()[-overlap_words:]
    return len(words) if words and text.startswith(" ".join(words) + BLOCK_SEP) else 0


def assemble(chunks: list[common_pb2.Chunk], overlap_words: int) -> collections_pb2.FetchedDocument:
    """One document from all its stored chunks (any order)."""
    ordered = sorted(chunks, key=lambda c: c.position)
    first = ordered[0]
    doc = collections_pb2.FetchedDocument(id=first.doc_id, title=first.title, metadata=first.metadata,
                                          content_hash=first.content_hash, written_at_ms=first.written_at_ms)
    text, heading = "", ""
    starts: list[int] = []  # where each word of the text so far begins
    previous = ""  # the text of the chunk before

    def append(block: str) -> int:
        nonlocal text
        text += (BLOCK_SEP if text else "") + block
        begin = len(text) - len(block)
        starts.extend(begin + m.start() for m in WORD.finditer(block))
        return begin

    for chunk in ordered:
        body, repeated = chunk.text, 0
        if chunk.heading == heading and (repeated := repeated_tail(previous, chunk.text, overlap_words)):
            body = chunk.text[len(" ".join(previous.split()[-repeated:])) + len(BLOCK_SEP):]
        if chunk.heading and chunk.heading != heading:
            append(heading_line(chunk.heading))
        heading = chunk.heading
        first_word = len(starts)
        begin = append(body)
        # The repeated words are the text's last ones before this block (the chunk before ends there).
        start = starts[first_word - repeated] if repeated else begin
        doc.chunks.add(chunk_id=chunk.chunk_id, position=chunk.position, heading=chunk.heading, start=start,
                       end=begin + len(body))
        previous = chunk.text
    doc.text = text
    return doc


def check_get(request: collections_pb2.GetDocumentsRequest) -> tuple[str, list[str]]:
    collection = check_collection(request.collection)
    if not 0 < len(request.ids) <= MAX_GET_IDS:
        raise InvalidArgument(f"send 1-{MAX_GET_IDS} ids, got {len(request.ids)}")
    return collection, list(dict.fromkeys(check_doc_ids(request.ids)))


async def get_documents(request: collections_pb2.GetDocumentsRequest, backends: Backends, catalog: Catalog,
                        overlap_words: int, sealer: Sealer,
                        readers_of: Callable[[str], common_pb2.Readers | None] = lambda _: None,
                        ) -> collections_pb2.GetDocumentsResponse:
    """The documents asked for, found ones in the order asked and the rest in `missing` (a document the caller may
    not read, `readers_of(collection)`, is missing as one the collection does not hold is); a Refusal:
    INVALID_ARGUMENT, NOT_FOUND (no such collection), FAILED_PRECONDITION (a sealed collection without its
    key, or a record that does not open), UNAVAILABLE (the BM25 store did not answer)."""
    collection, ids = check_get(request)
    seal = sealer.of(collection)  # SealingError (as a search: whether or not a store holds it yet)
    located = await catalog.located([collection])
    if located.missing:
        raise Refusal(f"collection {collection!r} does not exist", grpc.StatusCode.NOT_FOUND)
    stored = located.stored[collection]  # an alias: its serving generation
    try:
        reply = await backends.bm25.GetChunks(common_pb2.GetChunksRequest(collection=stored, doc_ids=ids),
                                              timeout=GET_TIMEOUT_S)
    except grpc.aio.AioRpcError as err:
        raise Refusal(f"the bm25 store did not answer ({err.details()}); retry") from None
    who = readers_of(collection)
    chunks = [c for c in reply.chunks if acl_readable(who, c.acl)]  # before anything of a forbidden one is opened
    chunks = [seal.open_chunk(c) for c in chunks] if seal is not None else chunks
    found = chunks_by_document(chunks)
    return collections_pb2.GetDocumentsResponse(
        collection=collection, documents=[assemble(found[i], overlap_words) for i in ids if i in found],
        missing=[i for i in ids if i not in found])
