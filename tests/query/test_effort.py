"""The effort table: complete, and what each level implies."""

import pytest

from hybridsearch.query.effort import EFFORTS, Expansion, RerankDefault, effort_policy
from hybridsearch.v1 import common_pb2

FAST, BALANCED, THOROUGH = common_pb2.EFFORT_FAST, common_pb2.EFFORT_BALANCED, common_pb2.EFFORT_THOROUGH


def test_every_effort_has_a_row():
    assert set(EFFORTS) == set(common_pb2.Effort.values()) - {common_pb2.EFFORT_UNSPECIFIED}


def test_unspecified_is_balanced():
    assert effort_policy(common_pb2.EFFORT_UNSPECIFIED) is EFFORTS[BALANCED]


def test_fast_runs_the_bare_legs():
    fast = EFFORTS[FAST]
    assert not fast.expands and fast.expansion is Expansion.NONE
    assert not fast.rocchio_feedback and fast.rerank is RerankDefault.NEVER
    assert not fast.reranks_unasked(in_balanced=True)
    assert fast.deadline_s(10.0, 30.0) == 10.0


def test_balanced_reranks_only_where_configured():
    balanced = EFFORTS[BALANCED]
    assert balanced.expansion is Expansion.PRF and balanced.prf_only_if_configured and balanced.rocchio_feedback
    assert balanced.reranks_unasked(in_balanced=True) and not balanced.reranks_unasked(in_balanced=False)
    assert not balanced.deep_rerank_pool and balanced.deadline_s(10.0, 30.0) == 10.0


def test_thorough_goes_deep_and_waits_for_the_llm():
    thorough = EFFORTS[THOROUGH]
    assert thorough.expansion is Expansion.LLM and not thorough.prf_only_if_configured
    assert thorough.reranks_unasked(in_balanced=False) and thorough.deep_rerank_pool
    assert thorough.deadline_s(10.0, 30.0) == 30.0


@pytest.mark.parametrize("effort", sorted(EFFORTS))
def test_names_match_the_proto(effort):
    assert common_pb2.Effort.Name(effort) == f"EFFORT_{EFFORTS[effort].name.upper()}"
