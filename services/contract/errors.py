"""The refusals a servicer answers with: a Refusal carries its gRPC status code and a message for the caller
(InvalidArgument: INVALID_ARGUMENT, raised by the validators of gateway and stores alike); abort_invalid ends the
call with it."""

from __future__ import annotations

import grpc


class Refusal(Exception):
    """A request answered with `code` and this message (servicers abort with it: abort_invalid)."""

    code = grpc.StatusCode.UNAVAILABLE

    def __init__(self, message: str, code: grpc.StatusCode | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code


class InvalidArgument(Refusal, ValueError):
    """Raised by validators; servicers turn it into INVALID_ARGUMENT."""

    code = grpc.StatusCode.INVALID_ARGUMENT


async def abort_invalid(context: grpc.aio.ServicerContext, err: Exception) -> None:
    """Ends the call with the refusal's code (INVALID_ARGUMENT for anything else) and its message."""
    await context.abort(getattr(err, "code", grpc.StatusCode.INVALID_ARGUMENT), str(err))
