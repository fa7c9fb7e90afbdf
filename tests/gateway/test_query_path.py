"""The query path's orchestration without a stack: gateway.search.QueryPath over in-process stand-ins of
the leg services, expansion, fusion and Triton. Each rule of the path, one test: a failed leg degrades,
no leg answering is no answer, a late leg is cut and reported (each round judged against its like), a
failed fusion service falls back in-process, a failed reranker leaves the fused order, a deadline that
runs out skips rerank with a notice."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

import grpc
import pytest

from hybridsearch.common.config import Settings
from hybridsearch.fusion.service import FusionServicer
from hybridsearch.gateway.deadline import Deadline
from hybridsearch.gateway.report import FAILED, OK, SKIPPED, Report
from hybridsearch.gateway.request import plan_search
from hybridsearch.gateway.search import QueryPath
from hybridsearch.v1 import common_pb2, expansion_pb2, search_pb2

ORIGINAL, HYDE = common_pb2.QUERY_KIND_ORIGINAL, common_pb2.QUERY_KIND_HYDE
LEXICAL, SEMANTIC = common_pb2.QUERY_KIND_LEXICAL_VARIANT, common_pb2.QUERY_KIND_SEMANTIC_VARIANT
FAST, BALANCED, THOROUGH = common_pb2.EFFORT_FAST, common_pb2.EFFORT_BALANCED, common_pb2.EFFORT_THOROUGH


def rpc_error(code: grpc.StatusCode, details: str) -> grpc.aio.AioRpcError:
    return grpc.aio.AioRpcError(code, grpc.aio.Metadata(), grpc.aio.Metadata(), details)


@dataclass
class Call:
    """One RPC of a stand-in service: answers `answer(request)` after `delay` seconds, or raises `error`."""

    answer: object = None
    delay: float = 0.02  # a hop's worth: an answer never comes in the same turn of the loop
    error: BaseException | None = None
    requests: list = field(default_factory=list)

    async def __call__(self, request, timeout=None):
        self.requests.append(request)
        await asyncio.sleep(self.delay)
        if self.error is not None:
            raise self.error
        return self.answer(request)


def leg_answer(leg: int, docs: list[str]):
    """A leg service's answer: one list per query, `docs` in order, each hit with its text."""
    def answer(request):
        return common_pb2.LegSearchResponse(engine="stand-in", lists=[
            common_pb2.RankedList(leg=leg, kind=q.kind, query=q.text, hits=[
                common_pb2.LegHit(doc_id=d, chunk_id=f"{d}#0", title=d, text=f"{d} text about {q.text}",
                                  score=10.0 - r, rank=r + 1) for r, d in enumerate(docs)])
            for q in request.queries])
    return answer


class Reranker:
    def __init__(self, error: BaseException | None = None) -> None:
        self.error, self.calls = error, 0

    async def model_info(self):
        return {"name": "stand-in", "trained": True, "gpu": False}

    async def score(self, query, passages, timeout):
        self.calls += 1
        if self.error is not None:
            raise self.error
        return [float(i) for i in range(len(passages))]  # the reverse of fused order


class Fusion:
    def __init__(self, error: BaseException | None = None) -> None:
        self.error, self.calls = error, 0

    async def Fuse(self, request, timeout=None):
        self.calls += 1
        if self.error is not None:
            raise self.error
        return await FusionServicer().Fuse(request, None)


@dataclass
class Stub:
    Search: Call
    GetChunks: Call = field(default_factory=lambda: Call(lambda r: common_pb2.GetChunksResponse()))
    TagSearch: Call | None = None
    Neighbours: Call | None = None


@dataclass
class Backends:
    bm25: Stub
    vector: Stub
    expansion: object
    fusion: Fusion
    reranker: Reranker


def expansion(delay: float = 0.0, error: BaseException | None = None) -> Stub:
    answer = expansion_pb2.ExpandResponse(lexical_variants=["lexical one", "lexical two"],
                                          semantic_variants=["semantic one"], hyde="a hypothetical passage",
                                          generator="llm", cache_available=True)
    stub = Stub(Search=Call())
    stub.Expand = Call(lambda r: answer, delay, error)
    return stub


def backends(bm25: Call | None = None, vector: Call | None = None, **kw) -> Backends:
    return Backends(bm25=Stub(bm25 or Call(leg_answer(common_pb2.LEG_BM25, ["a", "b", "c", "d", "e", "f"]))),
                    vector=Stub(vector or Call(leg_answer(common_pb2.LEG_VECTOR, ["c", "a", "g", "h", "i", "j"]))),
                    expansion=kw.get("expansion", expansion()), fusion=kw.get("fusion", Fusion()),
                    reranker=kw.get("reranker", Reranker()))


def settings(**resilience) -> Settings:
    return Settings(resilience={"straggler_grace_s": 0.2, "straggler_factor": 2.0, **resilience})


async def run(parts: Backends, deadline_s: float = 5.0, s: Settings | None = None, **request):
    s = s or settings()
    plan = plan_search(search_pb2.SearchRequest(query="fusion of ranked lists", **request), s)
    report = Report()
    answer = await QueryPath(s, parts).answer(plan, Deadline(deadline_s), report)
    return answer, report


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
    from hybridsearch.common.validation import InvalidArgument
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
