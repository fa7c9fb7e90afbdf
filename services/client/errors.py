"""Typed errors of the client: each carries the gRPC status code and the server's message.

They subclass grpc.RpcError (with `code()` and `details()`), so code written against plain gRPC keeps
working; new code catches what it means: `except InvalidArgument`, `except Retryable`."""

from __future__ import annotations

import grpc


class HybridSearchError(grpc.RpcError):
    """A call the gateway answered with an error (or that never reached it)."""

    code_: grpc.StatusCode = grpc.StatusCode.UNKNOWN

    def __init__(self, message: str, code: grpc.StatusCode | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code_ = code

    def code(self) -> grpc.StatusCode:
        return self.code_

    def details(self) -> str:
        return self.message

    def __str__(self) -> str:
        return f"{self.code_.name}: {self.message}"


class Retryable(HybridSearchError):
    """Worth another try later (the client already retried UNAVAILABLE per its retry policy)."""


class InvalidArgument(HybridSearchError):
    code_ = grpc.StatusCode.INVALID_ARGUMENT


class NotFound(HybridSearchError):
    code_ = grpc.StatusCode.NOT_FOUND


class Unauthenticated(HybridSearchError):
    code_ = grpc.StatusCode.UNAUTHENTICATED


class PermissionDenied(HybridSearchError):
    code_ = grpc.StatusCode.PERMISSION_DENIED


class FailedPrecondition(HybridSearchError):
    code_ = grpc.StatusCode.FAILED_PRECONDITION


class AlreadyExists(HybridSearchError):
    """A restore into a collection that exists."""

    code_ = grpc.StatusCode.ALREADY_EXISTS


class Unavailable(Retryable):
    code_ = grpc.StatusCode.UNAVAILABLE


class ResourceExhausted(Retryable):
    """The gateway is at capacity (or a request over a size limit): back off before retrying."""

    code_ = grpc.StatusCode.RESOURCE_EXHAUSTED


class DeadlineExceeded(Retryable):
    code_ = grpc.StatusCode.DEADLINE_EXCEEDED


class Cancelled(HybridSearchError):
    code_ = grpc.StatusCode.CANCELLED


ERRORS: dict[grpc.StatusCode, type[HybridSearchError]] = {
    cls.code_: cls for cls in (InvalidArgument, NotFound, Unauthenticated, PermissionDenied, FailedPrecondition,
                               AlreadyExists, Unavailable, ResourceExhausted, DeadlineExceeded, Cancelled)
}


def from_rpc_error(err: grpc.RpcError) -> HybridSearchError:
    """The typed error for a gRPC error (HybridSearchError itself for codes without a class of their own)."""
    code = err.code() if hasattr(err, "code") else grpc.StatusCode.UNKNOWN
    message = err.details() if hasattr(err, "details") else str(err)
    cls = ERRORS.get(code, HybridSearchError)
    return cls(message or code.name, code)
