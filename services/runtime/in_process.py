"""A servicer called in the caller's own process (topology.in_gateway): the same servicer code behind a stub's
interface, without the hop.

`InProcessMethod(servicer.Method)` is awaited as a stub's method is, `await method(request, timeout=...)`, and
fails as one does: the servicer's aborts, an exceeded timeout and anything the servicer raises come out as
`grpc.aio.AioRpcError` with the status a call over the wire would have carried (INVALID_ARGUMENT with its message,
DEADLINE_EXCEEDED, UNKNOWN), so the caller's error handling is the one it has for the service apart. The servicer
gets an `InProcessContext`: the parts of grpc.aio.ServicerContext the co-locatable servicers read.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Generic, NoReturn, TypeVar

import grpc

log = logging.getLogger(__name__)
Request = TypeVar("Request")
Response = TypeVar("Response")


def rpc_error(code: grpc.StatusCode, details: str) -> grpc.aio.AioRpcError:
    return grpc.aio.AioRpcError(code, grpc.aio.Metadata(), grpc.aio.Metadata(), details)


class InProcessContext:
    """A call's context in process: the time its caller gave it, and abort."""

    def __init__(self, timeout: float | None) -> None:
        self._deadline = None if timeout is None else time.monotonic() + timeout

    def time_remaining(self) -> float | None:
        return None if self._deadline is None else max(0.0, self._deadline - time.monotonic())

    async def abort(self, code: grpc.StatusCode, details: str = "") -> NoReturn:
        raise rpc_error(code, details)

    def invocation_metadata(self) -> tuple:
        return ()


class InProcessMethod(Generic[Request, Response]):
    """One servicer method with a stub method's call and failures."""

    def __init__(self, method: Callable[[Request, InProcessContext], Awaitable[Response]]) -> None:
        self.method = method

    async def __call__(self, request: Request, timeout: float | None = None, **_call_options) -> Response:
        try:
            return await asyncio.wait_for(self.method(request, InProcessContext(timeout)), timeout)
        except grpc.aio.AioRpcError:
            raise
        except asyncio.TimeoutError:
            raise rpc_error(grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded") from None
        except Exception as err:  # what a server would have answered UNKNOWN: the caller sees it so, logged here
            log.exception("in-process %s failed", getattr(self.method, "__qualname__", self.method))
            raise rpc_error(grpc.StatusCode.UNKNOWN, f"Unexpected {type(err).__name__}: {err}") from err
