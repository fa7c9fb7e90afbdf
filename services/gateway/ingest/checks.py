"""What a write may hold, checked before anything is written: the documents of one request, and the chunks a
store is sent (INVALID_ARGUMENT naming the limit otherwise)."""

from __future__ import annotations

from hybridsearch.contract.limits import MAX_DOCUMENTS, STORE_UPSERT_BYTES, human_bytes
from hybridsearch.contract.validation import check_document
from hybridsearch.contract.errors import InvalidArgument
from hybridsearch.security.acl import checked_acl
from hybridsearch.security.principals import PrincipalError
from hybridsearch.v1 import common_pb2, ingest_pb2


def check_store_request(request: common_pb2.UpsertChunksRequest) -> None:
    """A batch whose chunks (title and metadata copied into each) exceed what a store takes is refused."""
    size = request.ByteSize()
    if size > STORE_UPSERT_BYTES:
        raise InvalidArgument(f"the batch becomes {size} bytes of chunks for the stores; the limit is "
                              f"{human_bytes(STORE_UPSERT_BYTES)}: send fewer or smaller documents")


def _with_acl(doc: ingest_pb2.Document, acl: common_pb2.Acl) -> ingest_pb2.Document:
    """The document with its acl as checked (principals in order, each once): the same readers, the same terms."""
    out = ingest_pb2.Document()
    out.CopyFrom(doc)
    out.acl.CopyFrom(acl)
    return out


def validate_documents(documents) -> list[ingest_pb2.Document]:
    if len(documents) > MAX_DOCUMENTS:
        raise InvalidArgument(f"at most {MAX_DOCUMENTS} documents a request, got {len(documents)}")
    latest: dict[str, ingest_pb2.Document] = {}
    for i, doc in enumerate(documents):
        where = f"documents[{i}] ({doc.id!r})"
        check_document(doc, where)
        if doc.HasField("acl"):
            try:
                checked = checked_acl(doc.acl, f"{where}.acl")
            except PrincipalError as err:
                raise InvalidArgument(str(err)) from None
            doc = _with_acl(doc, checked)
        latest[doc.id] = doc  # a document repeated in one request: the last copy wins
    return list(latest.values())
