"""Stand-ins for the parts the gateway's query path calls (leg services, expansion, fusion, Triton), for
tests of gateway.query.path.QueryPath without a stack: each answers in-process after a hop's worth of time,
or fails as told. Fusion is the real FusionServicer, called in-process."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import grpc

from hybridsearch.config.settings import Settings
from hybridsearch.fusion.service import FusionServicer
from hybridsearch.gateway.query.deadline import Deadline
from hybridsearch.gateway.query.report import Report
from hybridsearch.gateway.query.request import plan_search
from hybridsearch.gateway.query.path import QueryPath
from hybridsearch.v1 import common_pb2, expansion_pb2, search_pb2


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
    """The stand-ins' settings: the chart's topology (a fusion service of its own), stragglers judged fast."""
    return Settings(resilience={"straggler_grace_s": 0.2, "straggler_factor": 2.0, **resilience},
                    topology={"in_gateway": []})


async def run(parts: Backends, deadline_s: float = 5.0, s: Settings | None = None, **request):
    s = s or settings()
    plan = plan_search(search_pb2.SearchRequest(query="fusion of ranked lists", **request), s)
    report = Report()
    answer = await QueryPath(s, parts).answer(plan, Deadline(deadline_s), report)
    return answer, report
