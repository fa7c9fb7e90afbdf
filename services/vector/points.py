"""Chunks as Qdrant points, what every Qdrant engine shares: point ids, payloads, filters, and the collection
and search settings VectorSettings gives (`collection_config`, `payload_indexes`, `search_params`: the same on a
server and in the embedded engines; the beam from the collection's size, vector/beam.py).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from qdrant_client import models

from hybridsearch.config.stores import VectorSettings
from hybridsearch.vector.beam import search_ef
from hybridsearch.storage.stores import (
    CONTENT_FIELDS,
    SPAN,
    span_payload,
    stored_content,
)
from hybridsearch.security.acl import ALLOW, DENY, acl_payload, refused, wanted
from hybridsearch.text.links import extract_links, page_keys
from hybridsearch.text.tags import matched, split_tags
from hybridsearch.v1 import common_pb2
from hybridsearch.vector.neighbours import KEYS, LINKS, WIKI

POINT_NAMESPACE = uuid.UUID("6f1c1a52-3f0e-4a55-9d7e-6a7c0b1f2e11")


def point_id(doc_id: str, position: int) -> str:
    """A chunk's point id, from its document and position (not its chunk id, which a store-specific
    chunking may name differently), so a document's points are found without a scan."""
    return str(uuid.uuid5(POINT_NAMESPACE, f"{doc_id}#{position}"))


def readers_filter(readers: common_pb2.Readers) -> models.Filter:
    """What `readers` may read (security/acl.py): an allow term of theirs, no deny term of theirs. A point written
    before readers were kept has no allow terms: the collection default's (IsEmpty, when the default admits them)."""
    may = [models.FieldCondition(key=ALLOW, match=models.MatchAny(any=wanted(readers)))]
    if readers.default_readable:
        may.append(models.IsEmptyCondition(is_empty=models.PayloadField(key=ALLOW)))
    denied = refused(readers)
    return models.Filter(should=may, must_not=[models.FieldCondition(key=DENY, match=models.MatchAny(any=denied))]
                         if denied else None)


def qdrant_filter(filters: list[common_pb2.MetadataFilter], doc_ids: list[str] | None = None,
                  readers: common_pb2.Readers | None = None) -> models.Filter | None:
    """The request's metadata filters; with `doc_ids`, only those documents' chunks (link expansion); with
    `readers`, only what they may read."""
    if not filters and doc_ids is None and readers is None:
        return None
    must, must_not = [], []
    if readers is not None:
        must.append(readers_filter(readers))
    if doc_ids is not None:
        must.append(models.FieldCondition(key="doc_id", match=models.MatchAny(any=list(doc_ids))))
    for f in filters:
        key = f"meta.{f.field}"
        which = f.WhichOneof("condition")
        if which == "equals":
            must.append(models.FieldCondition(key=key, match=models.MatchValue(value=f.equals)))
        elif which == "any_of":
            must.append(models.FieldCondition(key=key, match=models.MatchAny(any=list(f.any_of.values))))
        elif which == "not_equals":
            must_not.append(models.FieldCondition(key=key, match=models.MatchValue(value=f.not_equals)))
    return models.Filter(must=must or None, must_not=must_not or None)


def collection_config(cfg: VectorSettings, dim: int) -> dict:
    """Keyword arguments of `create_collection` for these settings."""
    quantization = None
    if cfg.quantization == "int8":
        quantization = models.ScalarQuantization(scalar=models.ScalarQuantizationConfig(
            type=models.ScalarType.INT8, quantile=cfg.quantization_quantile,
            always_ram=cfg.quantization_always_ram,
        ))
    vectors = models.VectorParams(size=dim, distance=models.Distance.COSINE, on_disk=cfg.on_disk_vectors)
    return {
        "vectors_config": vectors,
        "hnsw_config": models.HnswConfigDiff(m=cfg.hnsw_m, ef_construct=cfg.hnsw_ef_construct),
        "quantization_config": quantization,
        "shard_number": cfg.shard_number,
        "replication_factor": cfg.replication_factor,
        "write_consistency_factor": cfg.write_consistency_factor,
        "on_disk_payload": cfg.on_disk_payload,
    }


def payload_indexes(cfg: VectorSettings) -> dict[str, models.PayloadSchemaType]:
    """Payload field -> index type: what deletes, stats and metadata filters match on."""
    indexes = {"doc_id": models.PayloadSchemaType.KEYWORD, "position": models.PayloadSchemaType.INTEGER,
               TAGS: models.PayloadSchemaType.KEYWORD}  # the tag leg's exact lookup (match-any)
    for field in (LINKS, WIKI, KEYS):  # link expansion's lookups, both directions (vector/neighbours.py)
        indexes[field] = models.PayloadSchemaType.KEYWORD
    for field in (ALLOW, DENY):  # document readers (security/acl.py): every reader's search filters on them
        indexes[field] = models.PayloadSchemaType.KEYWORD
    for field in cfg.indexed_fields:
        indexes[f"meta.{field}"] = models.PayloadSchemaType.KEYWORD
    return indexes


def search_params(cfg: VectorSettings, points: int = 0) -> models.SearchParams:
    """The search settings of a collection of `points` points (its beam from its size: vector/beam.py)."""
    ef = search_ef(points, cfg.hnsw_ef) if cfg.hnsw_ef and cfg.hnsw_ef_by_size else cfg.hnsw_ef
    quantization = None
    if cfg.quantization != "none":
        quantization = models.QuantizationSearchParams(
            rescore=cfg.quantization_rescore, oversampling=cfg.quantization_oversampling,
        )
    acorn = models.AcornSearchParams(enable=True) if cfg.acorn else None
    return models.SearchParams(hnsw_ef=ef or None, exact=cfg.exact, quantization=quantization,
                               acorn=acorn)


UPSERT_BATCH = 512  # points per upsert call: bounded requests, and searches interleave with long writes
FIRST_CHUNKS = models.Filter(must=[models.FieldCondition(key="position", match=models.MatchValue(value=0))])


def chunk_payload(chunk: common_pb2.Chunk, chunks: int, tags_field: str = "tags", links_field: str = "links") -> dict:
    """A chunk point's payload; `chunks` (the document's chunk count) and `content_hash` ride on every
    chunk, so the first chunk alone tells whether a document changed and which points it has. `tags`:
    the document's tags (metadata `tags_field`, split), a keyword array the tag leg matches exactly.
    `links`, `wiki`: the chunk's outgoing links (its text's and metadata `links_field`'s); `keys`: the
    keys a wiki link reaches the document by (vector/neighbours.py)."""
    sealed = chunk.HasField("sealed")  # metadata and tags hashed; no links (they would name titles in clear)
    links = None if sealed else extract_links(chunk.doc_id, chunk.text, chunk.metadata, links_field)
    return {
        "chunk_id": chunk.chunk_id, "doc_id": chunk.doc_id, "position": chunk.position, "chunks": chunks,
        **stored_content(chunk), "content_hash": chunk.content_hash,
        "meta": dict(chunk.metadata), "written_at_ms": chunk.written_at_ms, SPAN: span_payload(chunk.span),
        TAGS: split_tags(chunk.metadata.get(tags_field, "")),
        LINKS: list(links.explicit) if links else [], WIKI: list(links.wiki) if links else [],
        KEYS: list(page_keys(chunk.doc_id, "" if sealed else chunk.title)), **acl_payload(chunk.acl),
    }


def reseal_payload(chunk: common_pb2.Chunk, tags_field: str = "tags") -> dict:
    """The payload fields a reseal replaces (chunk_payload's, for a sealed chunk): the sealed record and its key
    id, the keyed content hash, the hashed metadata and tags."""
    return {**stored_content(chunk), "content_hash": chunk.content_hash, "meta": dict(chunk.metadata),
            TAGS: split_tags(chunk.metadata.get(tags_field, ""))}


def tag_ranked(payloads: list[dict], keywords: list[str], limit: int) -> list[tuple[dict, int]]:
    """Chunks whose tags the query named, by how many (then document and position), one per document."""
    wanted = set(keywords)
    scored = sorted(((p, matched(p.get(TAGS, []), wanted)) for p in payloads),
                    key=lambda pc: (-pc[1], pc[0]["doc_id"], pc[0].get("position", 0)))
    seen: set[str] = set()
    out = []
    for payload, count in scored:
        if count and payload["doc_id"] not in seen:
            seen.add(payload["doc_id"])
            out.append((payload, count))
    return out[:limit]


# A stored chunk's payload fields, as reconcile copies it (the vector is embedded again from the text).
CHUNK_FIELDS = ["chunk_id", "doc_id", "position", *CONTENT_FIELDS, "content_hash", "meta", "written_at_ms", SPAN,
                ALLOW, DENY]
SCROLL_PAGE = 2048
TAGS = "tags"
# The tag leg reads at most this many matching chunks before ranking them by matched tags.
TAG_SCAN = 2000
TAG_FIELDS = ["chunk_id", "doc_id", "position", *CONTENT_FIELDS, "meta", TAGS]
# Link expansion reads at most this many linking chunks per lookup, and scores at most this many chunks
# of the neighbours (a document is represented by its best one).
LINK_SCAN = 2000
NEIGHBOUR_CHUNKS = 1000


def match_any(field: str, values: list[str]) -> models.FieldCondition | None:
    return models.FieldCondition(key=field, match=models.MatchAny(any=list(values))) if values else None


def any_of(field: str, values: list[str]) -> models.Filter:
    return models.Filter(must=[match_any(field, values)])


def document_point_ids(heads: dict[str, dict]) -> list[str]:
    """Every point of these documents, from their first chunks' payloads."""
    return [point_id(d, i) for d, head in heads.items() for i in range(int(head.get("chunks", 1)))]


@dataclass(frozen=True)
class VectorSpace:
    """What a collection's vectors are: the embedder that makes them (vector/embedder.py EMBEDDERS) and their
    dimension. Recorded with the collection's data when it is created."""

    embedder: str
    dim: int
