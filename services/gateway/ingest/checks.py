"""What a write may hold, checked before anything is written: the documents of one request, and the chunks a
store is sent (INVALID_ARGUMENT naming the limit otherwise)."""

from __future__ import annotations

from hybridsearch.contract.limits import MAX_DOCUMENTS, STORE_UPSERT_BYTES, human_bytes
from hybridsearch.contract.validation import check_document
from hybridsearch.contract.errors import InvalidArgument
from hybridsearch.v1 import common_pb2, ingest_pb2


def check_store_request(request: common_pb2.UpsertChunksRequest) -> None:
    """A batch whose chunks (title and metadata copied into each) exceed what a store takes is refused."""
    size = request.ByteSize()
    if size > STORE_UPSERT_BYTES:
        raise InvalidArgument(f"the batch becomes {size} bytes of chunks for the stores; the limit is "
                              f"{human_bytes(STORE_UPSERT_BYTES)}: send fewer or smaller documents")


def validate_documents(documents) -> list[ingest_pb2.Document]:
    if len(documents) > MAX_DOCUMENTS:
        raise InvalidArgument(f"at most {MAX_DOCUMENTS} documents a request, got {len(documents)}")
    latest: dict[str, ingest_pb2.Document] = {}
    for i, doc in enumerate(documents):
        check_document(doc, f"documents[{i}] ({doc.id!r})")
        latest[doc.id] = doc  # a document repeated in one request: the last copy wins
    return list(latest.values())
