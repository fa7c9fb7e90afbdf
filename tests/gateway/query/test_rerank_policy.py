"""The rerank decision, rule by rule (gateway.query.rerank_policy)."""

from __future__ import annotations

import pytest

from hybridsearch.config.search import RerankSettings
from hybridsearch.gateway.query.rerank_policy import ModelInfo, decide_rerank, needs_model, pool_bound
from hybridsearch.v1 import common_pb2, search_pb2

FAST, BALANCED, THOROUGH = common_pb2.EFFORT_FAST, common_pb2.EFFORT_BALANCED, common_pb2.EFFORT_THOROUGH

SKIPPED, FAILED, OK = search_pb2.LEG_STATE_SKIPPED, search_pb2.LEG_STATE_FAILED, search_pb2.LEG_STATE_OK
TRAINED_CPU = ModelInfo("minilm-ce", trained=True, gpu=False)
TRAINED_GPU = ModelInfo("minilm-ce", trained=True, gpu=True)
UNTRAINED = ModelInfo("fresh", trained=False, gpu=False)
CFG = RerankSettings()


@pytest.mark.parametrize("requested,effort,cfg,model,candidates,run,state,reason", [
    (False, THOROUGH, CFG, TRAINED_CPU, 100, False, SKIPPED, "not requested"),
    (None, FAST, CFG, TRAINED_CPU, 100, False, SKIPPED, "fast effort"),
    (True, FAST, CFG, TRAINED_CPU, 100, True, OK, "minilm-ce"),                       # asked for: FAST reranks too
    (True, BALANCED, CFG, None, 100, False, FAILED, "reranker unavailable"),
    (None, THOROUGH, CFG, None, 100, False, FAILED, "reranker unavailable"),
    (None, BALANCED, CFG, None, 100, False, SKIPPED, "reranker unavailable"),         # BALANCED would not have
    (None, BALANCED, CFG.model_copy(update={"in_balanced": True}), None, 100, False, FAILED, "unavailable"),
    (None, THOROUGH, CFG, UNTRAINED, 100, False, SKIPPED, "untrained"),
    (None, THOROUGH, CFG.model_copy(update={"allow_untrained": True}), UNTRAINED, 100, True, OK, "fresh"),
    (True, BALANCED, CFG, UNTRAINED, 100, True, OK, "fresh"),                         # forced: the model's call
    (None, BALANCED, CFG, TRAINED_CPU, 100, False, SKIPPED, "off in BALANCED"),
    (None, THOROUGH, CFG, TRAINED_CPU, CFG.min_candidates - 1, False, SKIPPED, "fewer than"),
    (None, THOROUGH, CFG, TRAINED_CPU, 1000, True, OK, f"{CFG.pool_cpu_deep} candidates"),
])
def test_decision(requested, effort, cfg, model, candidates, run, state, reason):
    decision = decide_rerank(requested, effort, cfg, model, "UNAVAILABLE: triton down", candidates)
    assert (decision.run, decision.state) == (run, state)
    assert reason in decision.reason


@pytest.mark.parametrize("effort,model,expected", [
    (THOROUGH, TRAINED_GPU, CFG.pool_gpu_deep), (BALANCED, TRAINED_GPU, CFG.pool_gpu_standard),
    (THOROUGH, TRAINED_CPU, CFG.pool_cpu_deep), (BALANCED, TRAINED_CPU, CFG.pool_cpu),
])
def test_pool_by_device_and_depth(effort, model, expected):
    assert decide_rerank(True, effort, CFG, model, candidates=10_000).pool == expected


def test_the_pool_is_never_more_than_the_candidates():
    assert decide_rerank(True, THOROUGH, CFG, TRAINED_CPU, candidates=CFG.min_candidates).pool == CFG.min_candidates


def test_triton_is_asked_only_when_the_request_leaves_it_open():
    assert needs_model(False, THOROUGH) is not None and needs_model(None, FAST) is not None
    assert needs_model(None, BALANCED) is None and needs_model(True, FAST) is None


@pytest.mark.parametrize("requested", [None, True, False])
@pytest.mark.parametrize("effort", [FAST, BALANCED, THOROUGH])
@pytest.mark.parametrize("cfg", [CFG, CFG.model_copy(update={"in_balanced": True, "allow_untrained": True})])
@pytest.mark.parametrize("model", [TRAINED_CPU, TRAINED_GPU, UNTRAINED])
def test_pool_bound_covers_every_decision(requested, effort, cfg, model):
    """What rerank_policy.text_depth reads before Triton is asked: never less than the pool decided afterwards."""
    decision = decide_rerank(requested, effort, cfg, model, "", 10_000)
    bound = pool_bound(requested, effort, cfg)
    assert decision.pool <= bound
    if not decision.run and requested is None and effort != THOROUGH:
        assert bound == 0  # a search that cannot rerank asks for no rerank texts
