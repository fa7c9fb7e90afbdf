"""The query path's orchestration without a stack: gateway.query.path.QueryPath over in-process stand-ins of
the leg services, expansion, fusion and Triton. Each rule of the path, one test: a failed leg degrades,
no leg answering is no answer, a late leg is cut and reported (each round judged against its like), a
failed fusion service falls back in-process, a failed reranker leaves the fused order, a deadline that
runs out skips rerank with a notice."""

from __future__ import annotations

import asyncio
import time

import grpc
import pytest
from query_standins import Call, Fusion, Reranker, backends, expansion, leg_answer, rpc_error, run, settings

from hybridsearch.gateway.query.report import FAILED, OK, SKIPPED, Report
from hybridsearch.fusion.service import FusionServicer
from hybridsearch.v1 import common_pb2, expansion_pb2, fusion_pb2

ORIGINAL, HYDE = common_pb2.QUERY_KIND_ORIGINAL, common_pb2.QUERY_KIND_HYDE
LEXICAL, SEMANTIC = common_pb2.QUERY_KIND_LEXICAL_VARIANT, common_pb2.QUERY_KIND_SEMANTIC_VARIANT
FAST, BALANCED, THOROUGH = common_pb2.EFFORT_FAST, common_pb2.EFFORT_BALANCED, common_pb2.EFFORT_THOROUGH


def states(report: Report) -> dict[str, int]:
    return {name: status.state for name, status in report.legs.items()}


async def test_both_legs_answer_and_fuse_in_the_fusion_service():
    parts = backends()
    answer, report = await run(parts, effort=FAST)
    assert states(report) | {"tag": OK} == {"bm25": OK, "vector": OK, "tag": OK, "expansion": SKIPPED,
                                            "graph": SKIPPED, "rerank": SKIPPED}
    assert parts.fusion.calls == 1 and not report.degraded
    assert [h.doc_id for h in answer.response.hits][:2] == ["a", "c"]  # in both lists' heads


async def test_a_failed_leg_degrades_the_answer():
    answer, report = await run(backends(bm25=Call(error=rpc_error(grpc.StatusCode.UNAVAILABLE, "bm25 down"))),
                               effort=FAST)
    assert report.degraded and report.legs["bm25"].state == FAILED and "bm25 down" in report.legs["bm25"].reason
    assert answer.response.degraded and {h.doc_id for h in answer.response.hits} <= set("cagh" "ij")


async def test_no_leg_answering_is_no_answer():
    down = rpc_error(grpc.StatusCode.UNAVAILABLE, "down")
    answer, report = await run(backends(bm25=Call(error=down), vector=Call(error=down)), effort=FAST)
    assert answer is None and states(report)["bm25"] == states(report)["vector"] == FAILED


async def test_a_leg_that_reports_invalid_argument_is_the_requests_fault():
    from hybridsearch.contract.errors import InvalidArgument
    with pytest.raises(InvalidArgument, match="bm25: bad filter"):
        await run(backends(bm25=Call(error=rpc_error(grpc.StatusCode.INVALID_ARGUMENT, "bad filter"))), effort=FAST)


async def test_a_late_leg_is_cut_and_reported():
    slow = Call(leg_answer(common_pb2.LEG_VECTOR, ["x"]), delay=3.0)
    started = time.perf_counter()
    answer, report = await run(backends(vector=slow), effort=FAST)
    took = time.perf_counter() - started
    assert took < 1.5, "the straggler was waited for"
    assert report.legs["vector"].state == FAILED and "late" in report.legs["vector"].reason
    assert answer.response.degraded and "x" not in {h.doc_id for h in answer.response.hits}


async def test_variants_that_start_late_are_judged_against_each_other_not_the_originals():
    """THOROUGH waits for its LLM: the originals answer at once, expansion a second later. Its variants then
    run as a round of their own and are fused, not cut as late (the defect of issue 23)."""
    parts = backends(expansion=expansion(delay=1.0))
    answer, report = await run(parts, effort=THOROUGH, explain=True, rerank=False)
    kinds = {(rl.leg, rl.kind) for rl in answer.response.explain.leg_lists}
    assert {(common_pb2.LEG_BM25, LEXICAL), (common_pb2.LEG_VECTOR, SEMANTIC), (common_pb2.LEG_VECTOR, HYDE)} <= kinds
    assert not any("variant queries failed" in n for n in report.notices), report.notices
    assert len(answer.response.explain.leg_lists) == 2 + 2 + 2  # originals, 2 lexical, semantic + HyDE


async def test_a_straggling_variant_round_member_is_still_cut():
    """Within the variants' round the rule holds: a vector variant call far slower than the BM25 one is cut."""
    vector = Call(leg_answer(common_pb2.LEG_VECTOR, ["c", "a"]))
    parts = backends(vector=vector, expansion=expansion(delay=0.2))
    original = vector.answer

    def slow_variants(request):
        return original(request)

    class Slow(Call):
        async def __call__(self, request, timeout=None):
            if request.queries[0].kind != ORIGINAL:
                await asyncio.sleep(3.0)
            return await super().__call__(request, timeout)

    parts.vector.Search = Slow(slow_variants)
    started = time.perf_counter()
    answer, report = await run(parts, effort=THOROUGH, rerank=False, explain=True)
    assert time.perf_counter() - started < 2.0
    assert any(n.startswith("vector variant queries failed: late") for n in report.notices), report.notices
    assert report.legs["vector"].state == OK  # its original list still counts
    assert {(rl.leg, rl.kind) for rl in answer.response.explain.leg_lists} >= {(common_pb2.LEG_BM25, LEXICAL)}


async def test_a_failed_fusion_service_fuses_in_the_gateway():
    parts = backends(fusion=Fusion(error=rpc_error(grpc.StatusCode.UNAVAILABLE, "fusion down")))
    answer, report = await run(parts, effort=FAST)
    assert parts.fusion.calls == 1 and report.degraded
    assert any("fused in the gateway" in n for n in report.notices)
    assert [h.doc_id for h in answer.response.hits][:2] == ["a", "c"]


async def test_the_gateway_reads_an_older_fusion_services_messages_and_refuses_columns_out_of_step():
    """A fusion service from before the packed answers (FusedHits, whatever was asked) gives the same answer;
    one whose columns do not line up is not read out of step: the gateway fuses itself and says so."""
    served, _ = await run(backends(), effort=FAST)

    async def older(request, timeout=None):
        unpacked = fusion_pb2.FuseRequest()
        unpacked.CopyFrom(request)
        unpacked.packed = False
        return await FusionServicer().Fuse(unpacked, None)

    parts = backends()
    parts.fusion.Fuse = older
    answer, report = await run(parts, effort=FAST)
    assert not report.degraded
    assert [(h.doc_id, h.chunk_id, h.score) for h in answer.response.hits] == \
        [(h.doc_id, h.chunk_id, h.score) for h in served.response.hits]

    async def out_of_step(request, timeout=None):
        response = await FusionServicer().Fuse(request, None)
        response.packed.evidence_ranks.pop()
        return response

    parts = backends()
    parts.fusion.Fuse = out_of_step
    answer, report = await run(parts, effort=FAST)
    assert report.degraded and any("do not line up" in n and "fused in the gateway" in n for n in report.notices)
    assert [(h.doc_id, h.chunk_id, h.score) for h in answer.response.hits] == \
        [(h.doc_id, h.chunk_id, h.score) for h in served.response.hits]


async def test_fast_fuses_in_the_gateway_where_the_operator_says_so_with_the_services_hits():
    """Settings.fuse_in_gateway_lists 2: FAST's two lists never reach the fusion service, and the answer is
    the one the service gives (the same library), hit by hit, score by score, not flagged degraded."""
    served, _ = await run(backends(), effort=FAST, explain=True)
    parts = backends()
    s = settings()
    s.query.fuse_in_gateway_lists = 2
    answer, report = await run(parts, s=s, effort=FAST, explain=True)
    assert parts.fusion.calls == 0 and not report.degraded and not answer.response.notices
    assert [(h.doc_id, h.chunk_id, h.score) for h in answer.response.hits] == \
        [(h.doc_id, h.chunk_id, h.score) for h in served.response.hits]
    assert answer.response.explain.fusion == served.response.explain.fusion  # the applied config as explained


@pytest.mark.parametrize("effort", [FAST, BALANCED])
async def test_fusion_inside_the_gateway_gives_the_services_answer_without_the_hop(effort):
    """topology.in_gateway [fusion]: every answer fused in the gateway by the same
    library, whatever its number of lists, hit by hit and score by score the answer the fusion service gives;
    a fusion service that is down is then no fault at all."""
    served, _ = await run(backends(), effort=effort, explain=True)
    parts = backends(fusion=Fusion(error=rpc_error(grpc.StatusCode.UNAVAILABLE, "fusion down")))
    s = settings()
    s.topology.in_gateway = ["fusion"]
    answer, report = await run(parts, s=s, effort=effort, explain=True)
    assert parts.fusion.calls == 0 and not report.degraded and not answer.response.notices
    assert len(answer.response.explain.leg_lists) >= 2
    assert [(h.doc_id, h.chunk_id, h.score) for h in answer.response.hits] == \
        [(h.doc_id, h.chunk_id, h.score) for h in served.response.hits]
    assert answer.response.explain.fusion == served.response.explain.fusion


async def test_a_failed_reranker_leaves_the_fused_order():
    fused_order = [h.doc_id for h in (await run(backends(), effort=FAST))[0].response.hits]
    parts = backends(reranker=Reranker(error=rpc_error(grpc.StatusCode.UNAVAILABLE, "triton down")))
    answer, report = await run(parts, effort=FAST, rerank=True)
    assert parts.reranker.calls == 1 and report.legs["rerank"].state == FAILED and report.degraded
    assert [h.doc_id for h in answer.response.hits] == fused_order


async def test_a_working_reranker_reorders_the_head():
    parts = backends()
    answer, report = await run(parts, effort=FAST, rerank=True)
    assert report.legs["rerank"].state == OK and answer.response.counts.reranked > 0
    assert any(h.reranked for h in answer.response.hits)


async def test_a_deadline_that_runs_out_skips_rerank_with_a_notice():
    slow = Call(leg_answer(common_pb2.LEG_BM25, ["a", "b", "c", "d", "e", "f"]), delay=0.3)
    parts = backends(bm25=slow, vector=Call(leg_answer(common_pb2.LEG_VECTOR, ["c", "a", "g", "h", "i"]), delay=0.3))
    answer, report = await run(parts, deadline_s=0.32, effort=FAST, rerank=True)
    assert parts.reranker.calls == 0 and report.legs["rerank"].state == SKIPPED
    assert report.legs["rerank"].reason.startswith("deadline")
    assert any(n.startswith("rerank skipped (deadline") for n in answer.response.notices)


async def test_a_failed_expansion_leaves_the_original_lists():
    parts = backends(expansion=expansion(error=rpc_error(grpc.StatusCode.UNAVAILABLE, "expansion down")))
    answer, report = await run(parts, effort=BALANCED, expand=True, explain=True)
    assert report.legs["expansion"].state == FAILED and report.degraded
    assert {rl.kind for rl in answer.response.explain.leg_lists} <= {ORIGINAL, common_pb2.QUERY_KIND_FEEDBACK}


async def test_several_collections_each_report_their_legs():
    down = rpc_error(grpc.StatusCode.UNAVAILABLE, "down")

    class PerCollection(Call):
        async def __call__(self, request, timeout=None):
            if request.collection == "broken":
                raise down
            return await super().__call__(request, timeout)

    parts = backends(bm25=PerCollection(leg_answer(common_pb2.LEG_BM25, ["a", "b"])))
    answer, report = await run(parts, effort=FAST, collections=["notes", "broken"])
    assert report.legs["bm25@broken"].state == FAILED and report.legs["bm25@notes"].state == OK
    assert {h.collection for h in answer.response.hits} == {"notes", "broken"}  # broken's vector leg answered


async def test_a_quick_expansion_sends_each_leg_its_original_and_variants_in_one_call():
    """PRF or a cached answer inside variant_batch_wait_s: one call a leg (one hop, one embedding batch)."""
    parts = backends(expansion=expansion(delay=0.005))
    answer, report = await run(parts, effort=BALANCED, explain=True)
    assert len(parts.vector.Search.requests) == len(parts.bm25.Search.requests) == 1
    assert [q.kind for q in parts.vector.Search.requests[0].queries] == [ORIGINAL, SEMANTIC, HYDE]
    assert [q.kind for q in parts.bm25.Search.requests[0].queries] == [ORIGINAL, LEXICAL, LEXICAL]
    assert len(answer.response.explain.leg_lists) == 6 and report.legs["vector"].state == OK


async def test_without_the_batch_window_variants_are_a_second_round():
    from query_standins import settings
    s = settings()
    s.query.variant_batch_wait_s = 0.0
    parts = backends(expansion=expansion(delay=0.005))
    answer, _ = await run(parts, s=s, effort=BALANCED, explain=True)
    assert len(parts.vector.Search.requests) == len(parts.bm25.Search.requests) == 2
    assert [q.kind for q in parts.vector.Search.requests[0].queries] == [ORIGINAL]
    assert len(answer.response.explain.leg_lists) == 6


async def test_thorough_fuses_balanceds_feedback_variants_and_the_llms_hyde():
    """THOROUGH's row (query.effort): PRF's variants, as BALANCED fuses them, and the LLM's HyDE passage; the
    LLM's own rewrites are dropped (they lost to PRF's: docs/quality.md "THOROUGH's policy")."""
    from query_standins import Stub

    def answer(request):
        if request.effort == common_pb2.EFFORT_THOROUGH:
            return expansion_pb2.ExpandResponse(lexical_variants=["llm rewrite"], semantic_variants=["llm semantic"],
                                                hyde="an llm passage", generator="llm:stand-in", cache_available=True)
        return expansion_pb2.ExpandResponse(lexical_variants=["prf terms"], semantic_variants=["prf semantic"],
                                            generator="prf", cache_available=True)

    stub = Stub(Search=Call())
    stub.Expand = Call(answer, delay=0.2)
    parts = backends(expansion=stub)
    answer_, report = await run(parts, effort=THOROUGH, rerank=False, explain=True)
    assert {r.effort for r in stub.Expand.requests} == {THOROUGH, BALANCED}
    queries = {(rl.kind, rl.query) for rl in answer_.response.explain.leg_lists}
    assert {(LEXICAL, "prf terms"), (SEMANTIC, "prf semantic"), (HYDE, "an llm passage")} <= queries
    assert not {q for _, q in queries} & {"llm rewrite", "llm semantic"}
    assert report.legs["expansion"].reason == "llm:stand-in"


async def test_a_leg_that_takes_no_variants_does_not_wait_for_expansion(monkeypatch):
    """Only the legs that take variants wait up to variant_batch_wait_s for them; an original-only leg (as the
    tag leg) is sent at once."""
    import dataclasses

    from query_standins import settings

    from hybridsearch.gateway.query.legs import registry

    started: dict[str, float] = {}

    @dataclasses.dataclass(frozen=True)
    class OriginalOnly:
        leg: int = 98
        name: str = "original-only"
        part: str = "bm25"
        off: str = "mode"
        kinds: frozenset[int] = frozenset({ORIGINAL})

        def used_by(self, plan) -> bool:
            return True

        def request(self, base, plan, s):
            return base

        def call(self, parts, request, timeout):
            started[self.name] = time.perf_counter()
            return parts.bm25.Search(request, timeout=timeout)

    from types import MappingProxyType
    monkeypatch.setattr(registry, "LEGS", MappingProxyType({**registry.LEGS, 98: OriginalOnly()}))
    s = settings()
    s.query.variant_batch_wait_s = 0.5
    parts = backends(expansion=expansion(delay=0.3))
    t = time.perf_counter()
    answer, report = await run(parts, s=s, effort=BALANCED, explain=True)
    assert started["original-only"] - t < 0.1, "the original-only leg waited for expansion"
    assert report.legs["original-only"].state == OK
    assert [q.kind for q in parts.vector.Search.requests[0].queries] == [ORIGINAL, SEMANTIC, HYDE]  # batched
