"""Packed fused lists (fusion.packed): the columns give back exactly the FusedHits the service answers one message
per hit (every method, random lists), the Fuse RPC answers them when asked, and columns that do not line up are
refused, not read out of step."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hybridsearch.contract.errors import InvalidArgument
from hybridsearch.fusion.methods import FusionMethod, FusionParams
from hybridsearch.fusion.packed import FusedDoc, LegEvidence, fused_docs, pack_docs, pack_fused, unpack_fused
from hybridsearch.fusion.params import params_to_proto
from hybridsearch.fusion.service import fuse_lists, fuse_proto
from hybridsearch.v1 import common_pb2, fusion_pb2

KINDS = [common_pb2.QUERY_KIND_ORIGINAL, common_pb2.QUERY_KIND_LEXICAL_VARIANT, common_pb2.QUERY_KIND_HYDE,
         common_pb2.QUERY_KIND_FEEDBACK]


def as_rows(hits) -> list[tuple]:
    """Fused hits of either kind as comparable rows (every field a packed answer carries)."""
    return [(h.doc_id, h.chunk_id, h.fusion_score, h.normalized_score,
             [(e.leg, e.kind, e.rank, e.score) for e in h.evidence]) for h in hits]


@st.composite
def lists(draw) -> list[common_pb2.RankedList]:
    out = []
    for _ in range(draw(st.integers(1, 4))):
        docs = draw(st.lists(st.sampled_from([f"d{i}" for i in range(12)]), max_size=15))
        scores = sorted(draw(st.lists(st.floats(-5, 5, allow_nan=False), min_size=len(docs), max_size=len(docs))),
                        reverse=True)
        out.append(common_pb2.RankedList(
            leg=draw(st.sampled_from([common_pb2.LEG_BM25, common_pb2.LEG_VECTOR, common_pb2.LEG_TAG, 9])),
            kind=draw(st.sampled_from(KINDS)), hits=[
                common_pb2.LegHit(doc_id=d, chunk_id=f"{d}#{draw(st.integers(0, 2))}", score=s, rank=r)
                for r, (d, s) in enumerate(zip(docs, scores), start=1)]))
    return out


@settings(max_examples=150, deadline=None)
@given(lists(), st.sampled_from(list(FusionMethod)), st.integers(1, 30))
def test_the_columns_are_the_fused_hits_message_by_message(ranked, method, limit):
    params = FusionParams(method=method)
    messages = fuse_proto(ranked, params, limit, with_text=False)
    docs = fused_docs(fuse_lists(ranked, params, limit))
    assert as_rows(docs) == as_rows(messages)
    packed = fusion_pb2.PackedFused.FromString(pack_fused(fuse_lists(ranked, params, limit)).SerializeToString())
    assert as_rows(unpack_fused(packed)) == as_rows(messages)
    # a kept order packs the documents (or messages) it holds, and reads back the same
    assert as_rows(unpack_fused(pack_docs(docs))) == as_rows(unpack_fused(pack_docs(messages))) == as_rows(messages)


def test_columns_that_do_not_line_up_are_refused():
    docs = [FusedDoc("a", "a#0", 1.0, 1.0, [LegEvidence(1, 1, 1, 2.0), LegEvidence(2, 1, 3, 0.5)]),
            FusedDoc("b", "b#0", 0.5, 0.5, [LegEvidence(1, 1, 2, 1.0)])]
    good = pack_docs(docs)
    assert as_rows(unpack_fused(good)) == as_rows(docs)
    for broken in (lambda p: p.chunk_ids.pop(), lambda p: p.evidence_ranks.pop(),
                   lambda p: p.evidence_counts.__setitem__(0, 3), lambda p: p.normalized_scores.append(0.1),
                   lambda p: p.evidence_counts.__setitem__(1, -1)):
        packed = fusion_pb2.PackedFused()
        packed.CopyFrom(good)
        broken(packed)
        with pytest.raises(InvalidArgument, match="do not line up"):
            unpack_fused(packed)


async def test_the_rpc_answers_columns_when_asked_and_messages_otherwise(fusion):
    ranked = [common_pb2.RankedList(leg=leg, kind=common_pb2.QUERY_KIND_ORIGINAL, hits=[
        common_pb2.LegHit(doc_id=d, chunk_id=f"{d}#0", score=10.0 - r, rank=r, title=f"T{d}", text=f"text {d}")
        for r, d in enumerate(ids, start=1)]) for leg, ids in ((common_pb2.LEG_BM25, "ABCD"), (common_pb2.LEG_VECTOR, "CAEF"))]
    config = params_to_proto(FusionParams(method=FusionMethod.ZSCORE))
    whole = await fusion.Fuse(fusion_pb2.FuseRequest(lists=ranked, config=config, limit=10))
    packed = await fusion.Fuse(fusion_pb2.FuseRequest(lists=ranked, config=config, limit=10, packed=True))
    assert not packed.hits and len(packed.packed.doc_ids) == len(whole.hits) == 6
    assert as_rows(unpack_fused(packed.packed)) == as_rows(whole.hits)
    assert whole.hits[0].text and packed.config == whole.config
