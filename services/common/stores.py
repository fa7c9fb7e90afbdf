"""Results that every chunk store (BM25 engines, vector stores) reports."""

from __future__ import annotations

from dataclasses import dataclass, field

from hybridsearch.v1 import common_pb2


def chunks_by_document(chunks: list[common_pb2.Chunk]) -> dict[str, list[common_pb2.Chunk]]:
    """A write's chunks grouped by document, in first-seen order (a document is replaced as a whole)."""
    by_doc: dict[str, list[common_pb2.Chunk]] = {}
    for c in chunks:
        by_doc.setdefault(c.doc_id, []).append(c)
    return by_doc


@dataclass
class UpsertResult:
    documents_written: int = 0
    documents_unchanged: int = 0
    chunks_written: int = 0


@dataclass
class EngineStats:
    engine: str
    documents: int
    chunks: int
    details: dict[str, str] = field(default_factory=dict)


class EngineUnavailable(RuntimeError):
    """An engine could not give a complete answer (cluster down, failed shards, timeout): UNAVAILABLE,
    which the gateway reports as a failed leg and a degraded answer, and a writer retries."""
