"""The gateway's Python clients: GatewayClient (blocking) and AsyncGatewayClient (asyncio), the same typed
methods on both; request builders in client.requests; typed errors in client.errors. docs/client.md."""

from hybridsearch.client.aio import AsyncGatewayClient
from hybridsearch.client.errors import (
    AlreadyExists,
    FailedPrecondition,
    HybridSearchError,
    InvalidArgument,
    NotFound,
    ResourceExhausted,
    Retryable,
    Unauthenticated,
    Unavailable,
)
from hybridsearch.client.requests import EFFORTS, MODES, Not, document, explain_lines, search_request, upsert_requests
from hybridsearch.client.sync import GatewayClient

__all__ = [
    "AlreadyExists", "AsyncGatewayClient", "EFFORTS", "FailedPrecondition", "GatewayClient", "HybridSearchError", "InvalidArgument",
    "MODES", "Not", "NotFound", "ResourceExhausted", "Retryable", "Unauthenticated", "Unavailable", "document", "explain_lines",
    "search_request", "upsert_requests",
]
