"""How deep the legs send texts (gateway.query.texts) and the servicers' trimming (storage.store_servicer)."""

from __future__ import annotations

import pytest

from hybridsearch.config.settings import Settings
from hybridsearch.storage.store_servicer import trim_texts
from hybridsearch.gateway.query.request import SearchPlan
from hybridsearch.gateway.query.rerank_policy import MARGIN, text_depth
from hybridsearch.fusion.params import FusionParams
from hybridsearch.v1 import common_pb2

FAST, BALANCED, THOROUGH = common_pb2.EFFORT_FAST, common_pb2.EFFORT_BALANCED, common_pb2.EFFORT_THOROUGH
SETTINGS = Settings()


def plan(effort=FAST, top_k=10, offset=0, rerank=None, parts=()) -> SearchPlan:
    return SearchPlan(query="q", collection="c", top_k=top_k, offset=offset, mode=common_pb2.RETRIEVAL_MODE_HYBRID,
                      effort=effort, filters=[], fusion=FusionParams(), rerank_requested=rerank, min_score=0.0,
                      explain=False, fuzzy=False, parts=parts)


@pytest.mark.parametrize("search,depth", [
    (plan(FAST), MARGIN * 10),                                     # the page only
    (plan(FAST, top_k=5, offset=15), MARGIN * 20),                 # down to the page's end
    (plan(BALANCED), MARGIN * 10),                                 # BALANCED does not rerank unless configured
    (plan(FAST, rerank=True), 0),                                  # a GPU pool (64) could be asked: every text
    (plan(THOROUGH), 0),                                           # the deep pool
    (plan(FAST, top_k=50, offset=50), 0),                          # as deep as the legs go
    (plan(FAST, parts=(plan(FAST),)), 0),                          # several collections dedupe by content
])
def test_text_depth(search, depth):
    assert text_depth(search, SETTINGS.query, SETTINGS.rerank) == depth


def test_text_depth_reaches_the_cpu_rerank_pool():
    settings = Settings(rerank={"in_balanced": True, "pool_gpu_standard": 10, "pool_cpu": 30})
    assert text_depth(plan(BALANCED), settings.query, settings.rerank) == MARGIN * 30


def lists(n: int) -> list[common_pb2.RankedList]:
    hits = [common_pb2.LegHit(chunk_id=f"d{i}#0", doc_id=f"d{i}", rank=i + 1, score=1.0 / (i + 1), title=f"t{i}",
                              text=f"text {i}", metadata={"tags": "x"}) for i in range(n)]
    return [common_pb2.RankedList(leg=common_pb2.LEG_BM25, hits=hits)]


def test_trim_keeps_the_head_and_every_id():
    (trimmed,) = trim_texts(lists(30), 12)
    assert [h.text for h in trimmed.hits[:12]] == [f"text {i}" for i in range(12)]
    assert all(not h.text and not h.title for h in trimmed.hits[12:])
    assert [(h.chunk_id, h.rank, h.metadata["tags"]) for h in trimmed.hits] == \
        [(f"d{i}#0", i + 1, "x") for i in range(30)]


def test_trim_zero_keeps_everything():
    assert trim_texts(lists(30), 0) == lists(30)
