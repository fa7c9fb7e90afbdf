"""The Fuse RPC over loopback gRPC: a config with the old named weights (an old gateway's) and one with keyed
weights fuse alike, both come back in the applied config, and a leg the leg table has no row for fuses."""

from __future__ import annotations

import grpc
import pytest

from hybridsearch.query import legs
from hybridsearch.config.search import FusionSettings
from hybridsearch.fusion.params import params_from_settings, params_to_proto
from hybridsearch.v1 import common_pb2, fusion_pb2

BM25, VECTOR, TAG = common_pb2.LEG_BM25, common_pb2.LEG_VECTOR, common_pb2.LEG_TAG


def ranked(leg, ids, scores=None):
    scores = scores or [float(len(ids) - i) for i in range(len(ids))]
    return common_pb2.RankedList(leg=leg, kind=common_pb2.QUERY_KIND_ORIGINAL, hits=[
        common_pb2.LegHit(doc_id=d, chunk_id=f"{d}#0", score=s, rank=r)
        for r, (d, s) in enumerate(zip(ids, scores), start=1)])


LISTS = [ranked(BM25, "ABCD"), ranked(VECTOR, "CAEF", [0.9, 0.7, 0.4, 0.1]), ranked(TAG, "FB")]
OLD_FIELDS = {"bm25_weight": 0.25, "vector_weight": 0.75, "tag_weight": 0.5, "rrf_bm25_weight": 2.0,
              "rrf_vector_weight": 0.5, "rrf_tag_weight": 1.5, "graph_weight": 0.125}


def old_gateway_config(method: int) -> fusion_pb2.FusionConfig:
    """What a gateway from before the keyed weights sends: every named field, no maps."""
    return fusion_pb2.FusionConfig(method=method, rrf_k=60, variant_weight=0.5, hyde_weight=0.75,
                                   top_rank_bonus=0.125, **OLD_FIELDS)


def keyed_config(method: int) -> fusion_pb2.FusionConfig:
    return fusion_pb2.FusionConfig(
        method=method, rrf_k=60, variant_weight=0.5, hyde_weight=0.75, top_rank_bonus=0.125,
        leg_weights={"bm25": 0.25, "vector": 0.75, "tag": 0.5, "graph": 0.125},
        rrf_leg_weights={"bm25": 2.0, "vector": 0.5, "tag": 1.5, "graph": 0.125})


def hits(response: fusion_pb2.FuseResponse) -> list[tuple[str, float]]:
    return [(h.doc_id, h.fusion_score) for h in response.hits]


@pytest.mark.parametrize("method", [common_pb2.FUSION_METHOD_RRF, common_pb2.FUSION_METHOD_LINEAR,
                                    common_pb2.FUSION_METHOD_ZSCORE, common_pb2.FUSION_METHOD_DBSF])
async def test_an_old_gateways_named_weights_fuse_as_the_keyed_ones(fusion, method):
    old = await fusion.Fuse(fusion_pb2.FuseRequest(lists=LISTS, config=old_gateway_config(method), limit=10))
    new = await fusion.Fuse(fusion_pb2.FuseRequest(lists=LISTS, config=keyed_config(method), limit=10))
    assert hits(old) == hits(new) and len(old.hits) == 6
    assert old.config == new.config  # both forms applied and echoed: the maps and, for old readers, the named fields
    assert {name: getattr(new.config, name) for name in OLD_FIELDS} == OLD_FIELDS
    assert dict(new.config.leg_weights) == dict(keyed_config(method).leg_weights)


async def test_a_leg_without_a_row_fuses_with_the_default_weight(fusion):
    config = params_to_proto(params_from_settings(FusionSettings(method="rrf", top_rank_bonus=0.0)))
    unknown = ranked(99, "Z")  # a newer gateway's leg: an open enum value
    response = await fusion.Fuse(fusion_pb2.FuseRequest(lists=[ranked(BM25, "A"), unknown], config=config, limit=10))
    scores = dict(hits(response))
    assert scores["Z"] == pytest.approx(legs.DEFAULT_RRF_WEIGHT / 61) and scores["A"] == pytest.approx(1 / 61)
    assert [e.leg for h in response.hits if h.doc_id == "Z" for e in h.evidence] == [99]
    config.rrf_leg_weights["leg_99"] = 0.5  # its weight, named by the key fusion gives a value without a row
    response = await fusion.Fuse(fusion_pb2.FuseRequest(lists=[unknown], config=config, limit=10))
    assert response.hits[0].fusion_score == pytest.approx(0.5 / 61)


async def test_a_list_without_a_leg_is_refused(fusion):
    config = params_to_proto(params_from_settings(FusionSettings()))
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await fusion.Fuse(fusion_pb2.FuseRequest(lists=[ranked(common_pb2.LEG_UNSPECIFIED, "A")], config=config, limit=5))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "every list needs a leg" in err.value.details()
