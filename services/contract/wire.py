"""Requests that do not decode, or are too large, are refused before any servicer sees them.

gRPC decodes a request inside its method handler, and a decoder that raises (invalid UTF-8 in a
string field, truncated or garbage bytes) ends the call as UNKNOWN. `RequestGuard`, a server
interceptor of every service (runtime.server), replaces each hybridsearch RPC's decoder with one
that never raises: it returns an `errors.Refusal` in place of the message, with the status it
deserves — RESOURCE_EXHAUSTED for bytes over the RPC's limit (contract.limits), INVALID_ARGUMENT for bytes that
do not decode — and the RPC's behaviour answers that status instead of running. In a client stream
the refusal is raised by the request iterator, so the servicer can catch it (to say what the stream
had done before); uncaught, the guard answers it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import grpc

from hybridsearch.contract.limits import human_bytes, request_limit
from hybridsearch.contract.errors import InvalidArgument, Refusal, abort_invalid

PACKAGE = "/hybridsearch.v1."


def guarded_decoder(method: str, decode: Callable[[bytes], object], limit: int) -> Callable[[bytes], object]:
    """`decode`, but returning (not raising) a Refusal for bytes that do not decode or exceed `limit`."""
    rpc = method.lstrip("/")
    message = getattr(getattr(getattr(decode, "__self__", None), "DESCRIPTOR", None), "full_name", rpc)

    def decoder(data: bytes) -> object:
        if len(data) > limit:
            return Refusal(f"request is {len(data)} bytes; the limit of {rpc} is {human_bytes(limit)}",
                           grpc.StatusCode.RESOURCE_EXHAUSTED)
        try:
            return decode(data)
        except Exception as err:  # DecodeError, UnicodeDecodeError, anything the decoder raises
            return InvalidArgument(f"request does not decode as {message}: {type(err).__name__}: {err}")

    return decoder


async def _checked(requests: AsyncIterator) -> AsyncIterator:
    async for request in requests:
        if isinstance(request, Refusal):
            raise request
        yield request


def _unary(behaviour):
    async def guarded(request, context):
        if isinstance(request, Refusal):
            await abort_invalid(context, request)
        return await behaviour(request, context)

    return guarded


def _client_stream(behaviour):
    async def guarded(request_iterator, context):
        try:
            return await behaviour(_checked(request_iterator), context)
        except Refusal as err:
            await abort_invalid(context, err)

    return guarded


class RequestGuard(grpc.aio.ServerInterceptor):
    """Guards the decoding of every hybridsearch RPC (the contract's RPCs are unary or client-streaming)."""

    async def intercept_service(self, continuation, handler_call_details):
        handler = await continuation(handler_call_details)
        method = handler_call_details.method
        if handler is None or not method.startswith(PACKAGE) or handler.request_deserializer is None:
            return handler
        decoder = guarded_decoder(method, handler.request_deserializer, request_limit(method))
        if handler.unary_unary is not None:
            return grpc.unary_unary_rpc_method_handler(
                _unary(handler.unary_unary), decoder, handler.response_serializer)
        if handler.stream_unary is not None:
            return grpc.stream_unary_rpc_method_handler(
                _client_stream(handler.stream_unary), decoder, handler.response_serializer)
        return handler
