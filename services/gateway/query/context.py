"""Context: each hit's neighbouring chunks before and after it (SearchRequest.context), of the same kind (shared
chunks, or the vector leg's passages), from the stored chunks of the page's documents (gateway.query.texts); first
pages and later ones alike."""

from __future__ import annotations

from hybridsearch.v1 import common_pb2, search_pb2


def passage_of(chunk_id: str) -> bool:
    """Whether a chunk id is the vector leg's own passage ("<doc>#p<n>") rather than a shared chunk."""
    return chunk_id.rpartition("#")[2].startswith("p")


def attach_context(page: list[search_pb2.SearchHit], chunks: dict[tuple[str, str], common_pb2.Chunk], n: int) -> None:
    """Each hit's `n` neighbours before (nearest first) and after, of the same kind (shared chunks or the
    vector leg's passages), from `chunks`: every stored chunk of the page's documents by (collection, chunk id)."""
    by_place = {(collection, c.doc_id, passage_of(c.chunk_id), c.position): c for (collection, _), c in chunks.items()}
    for hit in page:
        own = chunks.get((hit.collection, hit.chunk_id))
        if own is None:
            continue
        place = (hit.collection, hit.doc_id, passage_of(hit.chunk_id))
        for side, step in ((hit.context_before, -1), (hit.context_after, 1)):
            near = (by_place.get((*place, own.position + step * k)) for k in range(1, n + 1))
            side.extend(context_chunk(c) for c in near if c is not None)


def context_chunk(chunk: common_pb2.Chunk) -> search_pb2.ContextChunk:
    return search_pb2.ContextChunk(chunk_id=chunk.chunk_id, position=chunk.position, heading=chunk.heading,
                                   text=chunk.text, span=chunk.span if chunk.HasField("span") else None)
