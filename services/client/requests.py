"""What the clients send, built from plain Python values: search requests, documents, upsert batches.

Pure functions shared by the sync and asyncio clients (and the CLI), unit-tested without a server."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Literal

from google.protobuf.descriptor import EnumDescriptor
from google.protobuf.internal.enum_type_wrapper import EnumTypeWrapper

from hybridsearch.query import legs
from hybridsearch.contract.limits import KiB, UPSERT_REQUEST_BYTES
from hybridsearch.security.acl import parse_acl
from hybridsearch.v1 import common_pb2, fusion_pb2, ingest_pb2, search_pb2

Mode = Literal["bm25", "vector", "hybrid"]
EffortName = Literal["fast", "balanced", "thorough"]
MODES = {"bm25": common_pb2.RETRIEVAL_MODE_BM25, "vector": common_pb2.RETRIEVAL_MODE_VECTOR,
         "hybrid": common_pb2.RETRIEVAL_MODE_HYBRID}
EFFORTS = {"fast": common_pb2.EFFORT_FAST, "balanced": common_pb2.EFFORT_BALANCED,
           "thorough": common_pb2.EFFORT_THOROUGH}


class Not(str):
    """A filter value the field must not equal: `filters={"status": Not("draft")}`."""


# A filter value: one value (equals), several (any of), or Not(value) (not equals).
FilterValue = str | Sequence[str] | Not
Filters = Mapping[str, FilterValue] | Iterable[common_pb2.MetadataFilter]


def metadata_filters(filters: Filters | None) -> list[common_pb2.MetadataFilter]:
    """`{"lang": "en", "team": ["a", "b"], "status": Not("draft")}` as MetadataFilters (all must hold)."""
    if not filters:
        return []
    if not isinstance(filters, Mapping):
        return list(filters)
    out = []
    for field, value in filters.items():
        if isinstance(value, Not):
            out.append(common_pb2.MetadataFilter(field=field, not_equals=str(value)))
        elif isinstance(value, str):
            out.append(common_pb2.MetadataFilter(field=field, equals=value))
        else:
            out.append(common_pb2.MetadataFilter(field=field, any_of=common_pb2.StringList(values=list(value))))
    return out


def _enum(table: Mapping[str, int], value: str | int | None, what: str) -> int:
    if value is None:
        return 0
    if isinstance(value, int):
        return value
    try:
        return table[value.lower()]
    except KeyError:
        raise ValueError(f"unknown {what} {value!r}; one of {', '.join(table)}") from None


def search_request(query: str, *, collection: str | None = None, top_k: int | None = None,
                   mode: Mode | int | None = None, effort: EffortName | int | None = None,
                   filters: Filters | None = None, min_score: float = 0.0, explain: bool = False,
                   offset: int = 0, rerank: bool | None = None,
                   fusion: fusion_pb2.FusionConfig | Mapping[str, float | int | Mapping[str, float]] | None = None,
                   **fields) -> search_pb2.SearchRequest:
    """A SearchRequest from keyword arguments; fields without a keyword here (newer ones) pass through
    by their proto names. Unset values keep the server's defaults (top_k 10, HYBRID, BALANCED).
    With `collections` (several), `collection` stays empty unless given (it must be one of them).
    `min_score` 0 keeps the deployment's score floor; `no_floor=True` turns it off."""
    if collection is None:
        collection = "" if fields.get("collections") else "default"
    request = search_pb2.SearchRequest(
        query=query, collection=collection, mode=_enum(MODES, mode, "mode"),
        effort=_enum(EFFORTS, effort, "effort"), filters=metadata_filters(filters), min_score=min_score,
        explain=explain, offset=offset, **fields,
    )
    if top_k is not None:
        request.top_k = top_k
    if rerank is not None:
        request.rerank = rerank
    if fusion is not None:
        request.fusion.CopyFrom(fusion if isinstance(fusion, fusion_pb2.FusionConfig)
                                else fusion_pb2.FusionConfig(**dict(fusion)))
    return request


MetadataValue = str | int | float | bool | Sequence[str]


def _metadata_value(field: str, value: MetadataValue) -> str:
    """A metadata value as stored (a string): a list joins with commas, as the tags and links fields read
    it; a mapping has no place in one field and is refused by name."""
    if isinstance(value, Mapping):
        raise ValueError(f"metadata field {field!r} holds a mapping; metadata is flat (field -> string): "
                         f"pass its entries as fields of their own")
    if isinstance(value, str):
        return value
    if isinstance(value, Sequence | set | frozenset):
        return ",".join(str(v) for v in value)
    return str(value)


def document(id: str, text: str = "", title: str = "", metadata: Mapping[str, MetadataValue] | None = None,
             acl: Sequence[str] | None = None, **fields: MetadataValue) -> ingest_pb2.Document:
    """`document("a1", "text...", title="A", lang="en")`, or the same metadata as a mapping:
    `document("a1", "text...", title="A", metadata={"lang": "en"})` (both may be given; a field named in
    both is refused). Values become strings; a list joins with commas (`tags=["db", "ops"]`). `acl`: who may
    read it (`["group:hr", "user:ana", "!user:bob"]`: `!` denies, `*` is everyone; security/acl.py); None: the
    collection's default readers."""
    both = sorted(set(metadata or {}) & set(fields))
    if both:
        raise ValueError(f"metadata field(s) {', '.join(both)} given both in metadata= and as keywords")
    merged = {**(metadata or {}), **fields}
    return ingest_pb2.Document(id=id, title=title, text=text,
                               metadata={k: _metadata_value(k, v) for k, v in merged.items()},
                               acl=parse_acl(acl, f"document {id!r} acl") if acl is not None else None)


def upsert_requests(collection: str, documents: Iterable[ingest_pb2.Document], batch_size: int,
                    max_bytes: int = UPSERT_REQUEST_BYTES) -> Iterable[ingest_pb2.UpsertRequest]:
    """Batches of at most `batch_size` documents and `max_bytes` each (a document over the limit alone
    goes by itself, and the gateway says which limit it exceeds)."""
    batch: list[ingest_pb2.Document] = []
    size = len(collection) + 16 * KiB  # the collection, and room for each document's tag and length
    used = size
    for doc in documents:
        n = doc.ByteSize() + 8
        if batch and (len(batch) == batch_size or used + n > max_bytes):
            yield ingest_pb2.UpsertRequest(collection=collection, documents=batch)
            batch, used = [], size
        batch.append(doc)
        used += n
    if batch:
        yield ingest_pb2.UpsertRequest(collection=collection, documents=batch)


def add_counts(total: ingest_pb2.UpsertResponse, part: ingest_pb2.UpsertResponse) -> None:
    for name in ("documents_received", "documents_written", "documents_unchanged", "chunks_written"):
        setattr(total, name, getattr(total, name) + getattr(part, name))


def enum_word(enum: EnumTypeWrapper | EnumDescriptor, value: int) -> str:
    """An enum value as a word: FUSION_METHOD_ZSCORE -> "zscore", LEG_STATE_OK -> "ok"; a value this build
    has no name for (a newer server's) stays a number."""
    descriptor = enum if isinstance(enum, EnumDescriptor) else enum.DESCRIPTOR
    named = descriptor.values_by_number.get(value)
    if named is None:
        return str(value)
    prefix = re.sub(r"(?<!^)(?=[A-Z])", "_", descriptor.name).upper() + "_"
    return named.name.removeprefix(prefix).lower()


def _fusion_field(field, value) -> str:
    if field.message_type is not None and field.message_type.GetOptions().map_entry:  # leg name -> weight
        return f"{field.name} " + " ".join(f"{leg} {weight:g}" for leg, weight in sorted(value.items()))
    if field.enum_type is not None:
        return f"{field.name} {enum_word(field.enum_type, value)}"
    if isinstance(value, float):  # float32 on the wire: 0.7 arrives as 0.699999988079071
        return f"{field.name} {value:g}"
    return f"{field.name} {value}"


def explain_lines(response: search_pb2.SearchResponse) -> list[str]:
    """A readable account of an explained answer: legs and their states, expansion, fusion applied, timings."""
    lines = [f"{s.name}: {enum_word(search_pb2.LegState, s.state)}"
             f"{' (' + s.reason + ')' if s.reason else ''}" for s in response.legs]
    if response.HasField("explain"):
        e = response.explain
        if e.query_language:
            lines.append(f"language: {e.query_language} ({e.query_language_source}, "
                         f"confidence {e.query_language_confidence:.2f})")
        if e.expansion_generator:
            lines.append(f"expansion: {e.expansion_generator}{' (cached)' if e.expansion_cache_hit else ''}: "
                         f"lexical {list(e.lexical_variants)} semantic {list(e.semantic_variants)}"
                         f"{' + HyDE' if e.hyde else ''}")
        for rl in e.leg_lists:
            lines.append(f"list {legs.name_of(rl.leg)}/"
                         f"{enum_word(common_pb2.QueryKind, rl.kind)} "
                         f"weight {rl.weight:g}: {len(rl.hits)} hits")
        if e.HasField("fusion"):
            lines.append("fusion: " + ", ".join(_fusion_field(f, v) for f, v in e.fusion.ListFields()
                                                if not f.GetOptions().deprecated))  # the old leg weights: in the maps
        if e.reranker_model:
            lines.append(f"reranker: {e.reranker_model}")
        lines.append("timings: " + ", ".join(f"{t.stage} {t.ms:.1f} ms" for t in e.timings))
    lines.extend(f"notice: {n}" for n in response.notices)
    return lines
