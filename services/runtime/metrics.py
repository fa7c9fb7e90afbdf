"""Prometheus metrics of every service, served on an HTTP port of their own (settings.metrics_port).

Every process records its gRPC calls (RpcMetricsInterceptor); the gateway adds per-stage and per-leg
latencies and degraded answers, expansion its cache lookups, the vector service its query vector cache's,
the reranker client its pool sizes.
Each service is one asyncio process, so prometheus-client's default registry needs no multiprocess
mode. Metric names are documented in docs/observability.md and used by services/observability.
"""

from __future__ import annotations

import inspect
import logging
import time

import grpc
from prometheus_client import Counter, Gauge, Histogram, start_http_server

from hybridsearch.query import legs

from hybridsearch.runtime import services

log = logging.getLogger(__name__)

# On one machine the launcher gives service N the port metrics_port + offset; on Kubernetes every
# pod uses metrics_port itself.
METRICS_PORT_OFFSETS = {s.name: s.metrics_offset for s in services.SERVICES}

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
POOL_BUCKETS = (5, 10, 20, 40, 64, 128, 256, 512)

RPC_DURATION = Histogram(
    "hybridsearch_rpc_duration_seconds", "Server-side duration of each gRPC call, by method and status code",
    ["server", "grpc_service", "grpc_method", "grpc_code"], buckets=LATENCY_BUCKETS,
)
SEARCHES = Counter(
    "hybridsearch_searches_total", "Searches answered by the gateway, by effort and outcome (ok, degraded, unavailable)",
    ["effort", "outcome"],
)
STAGE_DURATION = Histogram(
    "hybridsearch_search_stage_duration_seconds", "Duration of each stage of a search in the gateway",
    ["stage"], buckets=LATENCY_BUCKETS,
)
LEG_DURATION = Histogram(
    "hybridsearch_search_leg_duration_seconds", "Duration of each leg call the gateway makes (bm25, vector, expansion, rerank)",
    ["leg"], buckets=LATENCY_BUCKETS,
)
DEGRADED_LEGS = Counter(
    "hybridsearch_search_degraded_total", "Degraded answers, by the leg that failed (fusion: fused in the gateway)",
    ["leg"],
)
REJECTED = Counter(
    "hybridsearch_rejected_total", "Requests the gateway refused with RESOURCE_EXHAUSTED, by reason (queue_full, deadline, standing, wait: gateway/access/admission.py)",
    ["reason"],
)
WRITE_RACES = Counter(
    "hybridsearch_write_drop_races_total",
    "Writes a drop of their collection overlapped, written again in both stores (gateway/ingest/write_order.py)",
)
BREAKER_OPEN = Gauge(
    "hybridsearch_circuit_open", "1 while the gateway's circuit breaker for a part is open (the part is skipped)", ["part"],
)
IN_FLIGHT = Gauge("hybridsearch_searches_in_flight", "Searches holding an admission slot in the gateway")
QUEUED = Gauge("hybridsearch_searches_queued", "Searches waiting for an admission slot in the gateway")
CACHE_LOOKUPS = Counter(
    "hybridsearch_expansion_cache_lookups_total", "Expansion cache lookups in Redis, by result (hit, miss, error)",
    ["result"],
)
QUERY_VECTOR_LOOKUPS = Counter(
    "hybridsearch_query_vector_cache_lookups_total",
    "Query vector cache lookups in the vector service, by level (memory, redis) and result (hit, miss; "
    "redis also error: unreachable, slow or a bad value, and skipped: backing off after an error)",
    ["level", "result"],
)
QUERY_VECTOR_WRITES = Counter(
    "hybridsearch_query_vector_cache_writes_total",
    "Query vectors written to the shared Redis level, by result (ok, error, skipped: backing off or too "
    "many writes pending)",
    ["result"],
)
RERANK_POOL = Histogram(
    "hybridsearch_rerank_pool_size", "Candidates sent to the reranker on Triton per search", buckets=POOL_BUCKETS,
)

# What a degraded answer can name as the part that failed (DEGRADED_LEGS' labels): every leg of the leg
# table (query.legs), then the stages that are not legs.
NON_LEG_PARTS = ("expansion", "rerank", "fusion")
DEGRADABLE_LEGS = (*legs.names(), *NON_LEG_PARTS)
CACHE_RESULTS = ("hit", "miss", "error")
QUERY_VECTOR_RESULTS = {"memory": ("hit", "miss"), "redis": ("hit", "miss", "error", "skipped")}
QUERY_VECTOR_WRITE_RESULTS = ("ok", "error", "skipped")


def initialise(counter: Counter, label: str, values) -> None:
    """Exports every known label value at 0, so rates and ratios exist before the first event."""
    for value in values:
        counter.labels(**{label: value})


def metrics_port(settings, service: str) -> int:
    """The metrics port the launcher gives `service` on one machine (0 when metrics are off)."""
    return settings.metrics_port + METRICS_PORT_OFFSETS[service] if settings.metrics_port else 0


def metrics_port_env(settings, service: str) -> dict[str, str]:
    return {"HYBRIDSEARCH_METRICS_PORT": str(metrics_port(settings, service))}


def start_metrics_server(name: str, host: str, port: int) -> None:
    """Serves /metrics on host:port; a port already taken only loses the metrics, never the service."""
    if not port:
        return
    try:
        start_http_server(port, addr=host)
    except OSError as err:
        log.warning("%s: cannot serve Prometheus metrics on %s:%d (%s)", name, host, port, err)
        return
    log.info("%s: Prometheus metrics on http://%s:%d/metrics", name, host, port)


class RpcMetricsInterceptor(grpc.aio.ServerInterceptor):
    """Times every application RPC (health and reflection excluded) into RPC_DURATION."""

    def __init__(self, server: str) -> None:
        self.server = server

    async def intercept_service(self, continuation, handler_call_details):
        handler = await continuation(handler_call_details)
        method = handler_call_details.method
        if handler is None or method.startswith("/grpc."):
            return handler
        grpc_service, _, grpc_method = method.lstrip("/").partition("/")
        labels = {"server": self.server, "grpc_service": grpc_service, "grpc_method": grpc_method}

        def timed(behaviour):
            async def wrapper(request, context):
                started = time.perf_counter()
                code = "UNKNOWN"
                try:
                    response = behaviour(request, context)
                    if inspect.isawaitable(response):
                        response = await response
                    code = _code_name(context.code()) or "OK"
                    return response
                except BaseException:
                    code = _code_name(context.code()) or "UNKNOWN"
                    raise
                finally:
                    RPC_DURATION.labels(**labels, grpc_code=code).observe(time.perf_counter() - started)

            return wrapper

        # Every RPC of the contract returns one message (unary or client-streaming).
        if handler.unary_unary is not None:
            return grpc.unary_unary_rpc_method_handler(
                timed(handler.unary_unary), handler.request_deserializer, handler.response_serializer)
        if handler.stream_unary is not None:
            return grpc.stream_unary_rpc_method_handler(
                timed(handler.stream_unary), handler.request_deserializer, handler.response_serializer)
        return handler


def _code_name(code) -> str | None:
    if code is None:
        return None
    if isinstance(code, grpc.StatusCode):
        return code.name
    # grpc.aio reports the code set by abort() as its integer value.
    for status in grpc.StatusCode:
        if status.value[0] == code:
            return status.name
    return str(code)
