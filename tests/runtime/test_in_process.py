"""runtime/in_process.py: a servicer called in its caller's process fails as a stub's call would, with the status a
server would have sent (its aborts, the caller's timeout, anything it raises), and sees the time its caller gave it."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from hybridsearch.contract.errors import InvalidArgument, abort_invalid
from hybridsearch.runtime.in_process import InProcessContext, InProcessMethod
from hybridsearch.v1 import expansion_pb2


class Servicer:
    def __init__(self) -> None:
        self.remaining: list[float | None] = []

    async def Expand(self, request: expansion_pb2.ExpandRequest, context: InProcessContext) -> expansion_pb2.ExpandResponse:
        self.remaining.append(context.time_remaining())
        if request.query == "refuse":
            await abort_invalid(context, InvalidArgument("query is empty"))
        if request.query == "slow":
            await asyncio.sleep(5)
        if request.query == "broken":
            raise KeyError("a bug")
        return expansion_pb2.ExpandResponse(lexical_variants=[request.query + " more"], generator="prf")


async def test_an_answer_comes_back_as_the_servicer_made_it_with_the_callers_time():
    servicer = Servicer()
    call = InProcessMethod(servicer.Expand)
    answer = await call(expansion_pb2.ExpandRequest(query="tide"), timeout=2.0)
    assert list(answer.lexical_variants) == ["tide more"] and answer.generator == "prf"
    await call(expansion_pb2.ExpandRequest(query="tide"))
    assert 1.5 < servicer.remaining[0] <= 2.0 and servicer.remaining[1] is None


@pytest.mark.parametrize("query, code, details", [
    ("refuse", grpc.StatusCode.INVALID_ARGUMENT, "query is empty"),
    ("slow", grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded"),
    ("broken", grpc.StatusCode.UNKNOWN, "KeyError"),
])
async def test_failures_are_the_rpc_errors_a_stubs_caller_handles(query, code, details):
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await InProcessMethod(Servicer().Expand)(expansion_pb2.ExpandRequest(query=query), timeout=0.2)
    assert raised.value.code() == code and details in raised.value.details()
