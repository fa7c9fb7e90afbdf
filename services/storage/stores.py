"""Results that every chunk store (BM25 engines, vector stores) reports, and what reconcile reads of it."""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import grpc

from hybridsearch.contract.errors import InvalidArgument, Refusal
from hybridsearch.security.acl import ALLOW, DENY, acl_of, readers_key_of
from hybridsearch.v1 import common_pb2


# Per collection, beside an embedded engine's own files in its folder: what CreateCollection recorded of it (the
# vector store its embedder and dimension, tantivy its analysis language). Drops remove it with the folder,
# snapshots carry it, restores move it in with the folder.
COLLECTION_RECORD = "hybridsearch-collection.json"


def write_record(folder: Path, record: dict) -> None:
    """A collection's record written into its folder (made if need be) in one durable step: a reader never sees
    half of it, a crash never leaves an empty one."""
    folder.mkdir(parents=True, exist_ok=True)
    part = folder / f"{COLLECTION_RECORD}.part"
    with open(part, "w") as out:
        out.write(json.dumps(record))
        out.flush()
        os.fsync(out.fileno())
    os.replace(part, folder / COLLECTION_RECORD)
    handle = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(handle)
    finally:
        os.close(handle)


def read_record(folder: Path) -> dict | None:
    """A collection's record; None when its folder has none."""
    try:
        return json.loads((folder / COLLECTION_RECORD).read_text())
    except FileNotFoundError:
        return None


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


class SnapshotsUnsupported(RuntimeError):
    """An engine whose snapshots are not wired (Qdrant server's), or not set up (OpenSearch without a repository)."""


class SnapshotMissing(RuntimeError):
    """A snapshot's part names data its engine does not hold, or not whole: the restore is refused."""


def store_of(engine: str) -> str:
    """The store an engine's name names, without the embedder a vector engine's carries ("qdrant-edge+minilm")."""
    return engine.split("+", 1)[0]


class CollectionExists(RuntimeError):
    """A restore into a collection the engine already holds."""


class EngineUnavailable(RuntimeError):
    """An engine could not give a complete answer (cluster down, failed shards, timeout): UNAVAILABLE,
    which the gateway reports as a failed leg and a degraded answer, and a writer retries."""


# The payload fields a store keeps per chunk that reconcile lists (vector stores name metadata "meta").
LISTED_FIELDS = ["doc_id", "position", "content_hash", "written_at_ms", "key_id", ALLOW, DENY]


def stored_documents(payloads: Iterable[dict]) -> list[common_pb2.StoredDocument]:
    """Every document in a store's chunk payloads, by id: its hash, chunk count, write time, readers, whether its
    chunks are torn (hashes or readers disagree, or positions are not 0..n-1), and a sealed one's key ids."""
    docs: dict[str, tuple[set[str], set[str], list[int], int, set[str]]] = {}
    for p in payloads:
        hashes, readers, positions, written, key_ids = docs.setdefault(p["doc_id"], (set(), set(), [], 0, set()))
        hashes.add(p.get("content_hash", ""))
        readers.add(readers_key_of(acl_of(p) or common_pb2.Acl()))
        positions.append(int(p.get("position", 0)))
        if p.get("key_id"):
            key_ids.add(p["key_id"])
        docs[p["doc_id"]] = (hashes, readers, positions, max(written, int(p.get("written_at_ms", 0) or 0)), key_ids)
    out = []
    for doc_id in sorted(docs):
        hashes, readers, positions, written, key_ids = docs[doc_id]
        out.append(common_pb2.StoredDocument(
            doc_id=doc_id, content_hash=min(hashes), chunks=len(positions), written_at_ms=written,
            torn=len(hashes) > 1 or len(readers) > 1 or sorted(positions) != list(range(len(positions))),
            key_ids=sorted(key_ids), readers=min(readers),
        ))
    return out


# What a store keeps of a chunk's content: its texts, or for a sealed collection's chunk the sealed record
# and its key id instead (security/sealing.py; the texts are indexed, never stored).
CONTENT_FIELDS = ["title", "heading", "text", "sealed", "key_id"]


def stored_content(chunk: common_pb2.Chunk) -> dict:
    """The payload fields of a chunk's content: title, heading and text, or the sealed record (base64)."""
    if chunk.HasField("sealed"):
        return {"sealed": base64.b64encode(chunk.sealed.blob).decode(), "key_id": chunk.sealed.key_id}
    return {"title": chunk.title, "heading": chunk.heading, "text": chunk.text}


def content_of(p: dict, heading: bool = True) -> dict:
    """A payload's content as Chunk / LegHit fields: title and text (and heading), or `sealed`."""
    if "sealed" in p:
        return {"sealed": common_pb2.Sealed(blob=base64.b64decode(p["sealed"]), key_id=p.get("key_id", ""))}
    out = {"title": p.get("title", ""), "text": p.get("text", "")}
    if heading:
        out["heading"] = p.get("heading", "")
    return out


def unchanged_since(expected: dict[str, str], doc_id: str, stored_hash: str | None, stored_chunks: int,
                    chunks: int) -> bool:
    """A reseal's check (ResealChunksRequest): the document is still as it was read (hash and chunk count)."""
    return doc_id in expected and stored_hash == expected[doc_id] and stored_chunks == chunks


def refuse_sealed(chunks: Iterable[common_pb2.Chunk], engine: str) -> None:
    """An engine that would store a sealed chunk's texts (it keeps them in its own columns) refuses it."""
    if any(c.HasField("sealed") for c in chunks):
        raise InvalidArgument(f"the {engine} engine does not keep sealed records: a sealed collection needs "
                              "bm25.engine=tantivy (docs/security.md)")


# Stats details that count the whole collection: left out of a count on behalf of readers (StoreStatsRequest).
WHOLE_COLLECTION_DETAILS = frozenset({"segments", "indexed_vectors", "unindexed_writes", "score_scale"})


def refuse_readers(readers: common_pb2.Readers | None, engine: str) -> None:
    """An engine that keeps no document readers refuses a read on behalf of some (fail closed: it would show
    everything) and a write that sets them."""
    if readers is not None:
        raise Refusal(f"the {engine} engine keeps no document readers: searching on behalf of a caller with "
                      "principals needs bm25.engine=embedded or opensearch (docs/security.md)",
                      grpc.StatusCode.FAILED_PRECONDITION)


def refuse_acl(chunks: Iterable[common_pb2.Chunk], engine: str) -> None:
    if any(c.HasField("acl") for c in chunks):
        raise InvalidArgument(f"the {engine} engine keeps no document readers (acl): documents with readers need "
                              "bm25.engine=embedded or opensearch (docs/security.md)")


def chunk_from_payload(p: dict) -> common_pb2.Chunk:
    """A stored chunk as the stores exchange it (both payload layouts: `metadata` or `meta`)."""
    return common_pb2.Chunk(
        chunk_id=p["chunk_id"], doc_id=p["doc_id"], position=int(p["position"]), **content_of(p),
        metadata=p.get("metadata", p.get("meta")) or {},
        content_hash=p.get("content_hash", ""), written_at_ms=int(p.get("written_at_ms", 0) or 0),
        span=span_of(p), acl=acl_of(p),
    )


# A chunk's SourceSpan in a store's payload: [start_char, end_char, start_line, end_line] under "span";
# absent for chunks written before spans were kept (and the bm25s engine, whose table has no column for it).
SPAN = "span"


def span_payload(span: common_pb2.SourceSpan) -> list[int]:
    return [span.start_char, span.end_char, span.start_line, span.end_line] if span.end_line else []


def span_of(p: dict) -> common_pb2.SourceSpan | None:
    values = p.get(SPAN)
    if not values:
        return None
    start_char, end_char, start_line, end_line = values
    return common_pb2.SourceSpan(start_char=start_char, end_char=end_char, start_line=start_line, end_line=end_line)


class BuiltHits:
    """A LegHit per stored payload, built once and copied into each list that ranks it, with its score and rank:
    building 100 from their payloads cost a search 0.4-0.7 ms, copying built ones a third of that. Keyed by the
    payload object itself, which an engine's payload cache hands out until a write replaces it (bm25.payload_cache,
    vector.payload_cache; an entry keeps its payload, so the key is never another's), the fields the request shows
    and whether with its content; bounded (the engines keep twice their payload caches: a payload ranks with its
    content near the top of one list and without it deeper in another)."""

    def __init__(self, limit: int, build: Callable[[dict, tuple[str, ...], bool], common_pb2.LegHit]) -> None:
        self.limit, self.build = limit, build
        self._built: dict[tuple[int, tuple[str, ...], bool], tuple[dict, common_pb2.LegHit]] = {}

    def add(self, ranked: common_pb2.RankedList, payload: dict, score: float, rank: int, fields: tuple[str, ...],
            content: bool) -> None:
        key = (id(payload), fields, content)
        entry = self._built.get(key)
        if entry is None or entry[0] is not payload:
            if len(self._built) >= self.limit:
                self._built.clear()
            entry = self._built[key] = (payload, self.build(payload, fields, content))
        hit = ranked.hits.add()
        hit.CopyFrom(entry[1])
        hit.score, hit.rank = score, rank


def leg_hit(p: dict, score: float, rank: int, metadata_fields, content: bool = True) -> common_pb2.LegHit:
    """A hit from a store's payload (both layouts: `metadata` or `meta`); without `content`, its title, text and
    sealed record left out."""
    return common_pb2.LegHit(chunk_id=p["chunk_id"], doc_id=p["doc_id"], score=score, rank=rank,
                             **(content_of(p, heading=False) if content else {}),
                             metadata=picked_metadata(p.get("metadata", p.get("meta")) or {}, metadata_fields),
                             span=span_of(p))


def picked_metadata(meta: dict, fields) -> dict[str, str]:
    """The metadata keys a leg request asked for (LegSearchRequest.metadata_fields) that a hit has: what
    the gateway's metadata boosts read, and nothing more (hits stay small)."""
    return {f: str(meta[f]) for f in fields if f in meta}
