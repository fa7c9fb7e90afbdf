"""The resource calls the shell needs beyond search: documents by id (`:open N`) and the collections
(`:collections`), behind one small interface so that the shell does not care which client serves them.

The gateway's CollectionService (GetDocuments, ListCollections: issue 25, item 1) answers them; a client
without those methods, or a gateway that answers UNIMPLEMENTED, makes them NotAvailable, and the shell
says so (`:open` then shows what the hit itself carries)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import grpc

from hybridsearch.client import HybridSearchError
from hybridsearch.v1 import search_pb2


class NotAvailable(Exception):
    """The server (or this client) does not serve the named RPC."""

    def __init__(self, rpc: str) -> None:
        super().__init__(f"{rpc} is not available on this server")
        self.rpc = rpc


@dataclass(frozen=True)
class Document:
    id: str
    title: str
    text: str
    metadata: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class CollectionSummary:
    name: str
    documents: int
    chunks: int
    language: str = ""


class ShellClient(Protocol):
    """What the shell calls on a gateway client (GatewayClient has search; the resource methods come with
    the CollectionService: `get_documents(collection, ids)`, `list_collections()`)."""

    def search(self, query: search_pb2.SearchRequest) -> search_pb2.SearchResponse: ...


class Catalog:
    """Documents and collections through a ShellClient, as the shell's own small types."""

    def __init__(self, client: ShellClient) -> None:
        self.client = client

    def _call(self, rpc: str, method: str, *args) -> Any:
        call = getattr(self.client, method, None)
        if call is None:
            raise NotAvailable(rpc)
        try:
            return call(*args)
        except HybridSearchError as err:
            if err.code() == grpc.StatusCode.UNIMPLEMENTED:
                raise NotAvailable(rpc) from err
            raise

    def documents(self, collection: str, ids: Sequence[str]) -> list[Document]:
        answer = self._call("GetDocuments", "get_documents", collection, list(ids))
        return [Document(d.id, d.title, d.text, dict(d.metadata)) for d in answer.documents]

    def collections(self) -> list[CollectionSummary]:
        answer = self._call("ListCollections", "list_collections")
        return [CollectionSummary(c.name, c.documents, c.chunks, c.language) for c in answer.collections]
