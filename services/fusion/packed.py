"""Fused lists as columns (PackedFused): what a caller that keeps the hits' texts and metadata itself (the gateway)
gets back from fusion, and the fused documents as it works on them (`FusedDoc`).

A message per hit cost both sides of the fusion hop more than the fusion did (docs/performance.md, issue 35):
building a hundred FusedHit messages with their evidence, serialising and parsing them, then reading them field
by field. Columns are filled and read a column at a time. `FusedDoc` reads as a FusedHit does (the same field
names, the evidence as LegEvidence's), so the stages that read fused hits take either.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import accumulate
from typing import NamedTuple

from hybridsearch.contract.errors import InvalidArgument
from hybridsearch.fusion.methods import Fused, QueryKind
from hybridsearch.v1 import common_pb2, fusion_pb2

# A list's common_pb2.QueryKind as the library's, and back (proto3 enums are open: an unknown kind is original).
KINDS = {
    common_pb2.QUERY_KIND_UNSPECIFIED: QueryKind.ORIGINAL,
    common_pb2.QUERY_KIND_ORIGINAL: QueryKind.ORIGINAL,
    common_pb2.QUERY_KIND_LEXICAL_VARIANT: QueryKind.LEXICAL_VARIANT,
    common_pb2.QUERY_KIND_SEMANTIC_VARIANT: QueryKind.SEMANTIC_VARIANT,
    common_pb2.QUERY_KIND_HYDE: QueryKind.HYDE,
    common_pb2.QUERY_KIND_FEEDBACK: QueryKind.FEEDBACK,
}
KIND_ENUM = {kind: value for value, kind in KINDS.items() if value != common_pb2.QUERY_KIND_UNSPECIFIED}


class LegEvidence(NamedTuple):
    """fusion_pb2.LegEvidence's fields: where one list ranked a fused document."""
    leg: int   # common_pb2.Leg
    kind: int  # common_pb2.QueryKind
    rank: int
    score: float


@dataclass(slots=True)
class FusedDoc:
    """fusion_pb2.FusedHit's fields (title and text aside: a packed answer carries none)."""
    doc_id: str
    chunk_id: str
    fusion_score: float
    normalized_score: float
    evidence: list[LegEvidence] = field(default_factory=list)


def pack_fused(fused: Sequence[Fused]) -> fusion_pb2.PackedFused:
    """The library's fused documents as columns."""
    evidence = [e for f in fused for e in f.evidence]
    return _columns(fused, [f.score for f in fused], [f.normalized for f in fused], evidence,
                    [KIND_ENUM[e.kind] for e in evidence])


def pack_docs(docs: Iterable[FusedDoc | fusion_pb2.FusedHit]) -> fusion_pb2.PackedFused:
    """Fused documents (or FusedHit messages) as columns: the order a first page keeps for its later pages."""
    docs = list(docs)
    evidence = [e for d in docs for e in d.evidence]
    return _columns(docs, [d.fusion_score for d in docs], [d.normalized_score for d in docs], evidence,
                    [e.kind for e in evidence])


def _columns(docs: Sequence, scores: list[float], normalized: list[float], evidence: list,
             kinds: list[int]) -> fusion_pb2.PackedFused:
    """The columns of documents with `doc_id`, `chunk_id` and `evidence` (`leg`, `rank`, `score` each), their
    scores and their evidence's kinds as the caller read them (the library's and FusedHit's names differ)."""
    return fusion_pb2.PackedFused(
        doc_ids=[d.doc_id for d in docs], chunk_ids=[d.chunk_id for d in docs], fusion_scores=scores,
        normalized_scores=normalized, evidence_counts=[len(d.evidence) for d in docs],
        evidence_legs=[e.leg for e in evidence], evidence_kinds=kinds, evidence_ranks=[e.rank for e in evidence],
        evidence_scores=[e.score for e in evidence])


def unpack_fused(packed: fusion_pb2.PackedFused) -> list[FusedDoc]:
    """Columns as fused documents; InvalidArgument for columns that do not line up (a reply or a kept order
    from elsewhere is not trusted to)."""
    n, counts = len(packed.doc_ids), list(packed.evidence_counts)
    columns = (len(packed.chunk_ids), len(packed.fusion_scores), len(packed.normalized_scores), len(counts))
    entries = (len(packed.evidence_legs), len(packed.evidence_kinds), len(packed.evidence_ranks),
               len(packed.evidence_scores))
    total = sum(counts)
    if any(c != n for c in columns) or any(e != total for e in entries) or any(c < 0 for c in counts):
        raise InvalidArgument(f"packed fused hits do not line up: {n} doc ids, (chunk ids, scores, normalized, "
                              f"evidence counts) {columns}, {total} evidence by the counts, columns {entries}")
    evidence = list(map(LegEvidence, packed.evidence_legs, packed.evidence_kinds, packed.evidence_ranks,
                        packed.evidence_scores))
    ends = list(accumulate(counts))
    return [FusedDoc(doc_id, chunk_id, score, normalized, evidence[end - count:end])
            for doc_id, chunk_id, score, normalized, count, end in zip(
                packed.doc_ids, packed.chunk_ids, packed.fusion_scores, packed.normalized_scores, counts, ends)]


def fused_docs(fused: Sequence[Fused]) -> list[FusedDoc]:
    """The library's answer as the documents a packed reply would have given: the scores as the reply's 32-bit
    floats, so the gateway's own fusion and the service's order and score alike."""
    return unpack_fused(pack_fused(fused))

