"""Bootstrap shared by every gRPC server: health checking, reflection, request limits, graceful shutdown."""

from __future__ import annotations

import asyncio
import json
import logging
import signal
from collections.abc import Awaitable, Callable, Iterable, Sequence

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from hybridsearch.config.settings import get_settings
from hybridsearch.contract.limits import MAX_RESPONSE_BYTES, receive_limit
from hybridsearch.runtime.heap import freeze_startup_heap
from hybridsearch.runtime.metrics import RpcMetricsInterceptor, start_metrics_server
from hybridsearch.security.tls import add_port, aio_channel
from hybridsearch.runtime.telemetry import (
    grpc_client_interceptors,
    grpc_server_interceptors,
    setup_telemetry,
    shutdown_telemetry,
)
from hybridsearch.contract.wire import RequestGuard

log = logging.getLogger(__name__)

# Client channels: answers (ranked lists with passages) up to MAX_RESPONSE_BYTES. A server receives at
# most its largest RPC limit (limits.receive_limit), then each RPC its own (wire.RequestGuard).
CHANNEL_OPTIONS = [
    ("grpc.max_send_message_length", MAX_RESPONSE_BYTES),
    ("grpc.max_receive_message_length", MAX_RESPONSE_BYTES),
]


def configure_logging() -> None:
    logging.basicConfig(
        level=get_settings().log_level,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )


def create_server(name: str = "", extra_interceptors: Sequence[grpc.aio.ServerInterceptor] = ()) -> grpc.aio.Server:
    # Tracing first: the metrics interceptor then runs inside the server span, and the request guard
    # (undecodable or oversized requests answered with their status) inside both, so they count it.
    interceptors = [*grpc_server_interceptors(), RpcMetricsInterceptor(name), RequestGuard()]
    interceptors.extend(extra_interceptors)  # e.g. the gateway's API-key check (gateway/access/auth.py)
    # No SO_REUSEPORT: a second server on a taken port must fail to start, not silently share its traffic.
    options = [("grpc.max_send_message_length", MAX_RESPONSE_BYTES),
               ("grpc.max_receive_message_length", receive_limit(name)), ("grpc.so_reuseport", 0)]
    return grpc.aio.server(interceptors=interceptors, options=options,
                           maximum_concurrent_rpcs=get_settings().admission.max_concurrent_rpcs)


def add_health_and_reflection(
    server: grpc.aio.Server, service_names: Iterable[str]
) -> health.aio.HealthServicer:
    """Registers gRPC health (every service SERVING) and reflection for the given full names."""
    names = list(service_names)
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    reflection.enable_server_reflection([*names, health.SERVICE_NAME, reflection.SERVICE_NAME], server)
    return health_servicer


async def serve(
    name: str,
    port: int,
    register: Callable[[grpc.aio.Server], Awaitable[list[str]]],
    on_stop: Callable[[], Awaitable[None]] | None = None,
    interceptors: Sequence[grpc.aio.ServerInterceptor] = (),
) -> None:
    """Starts a server, marks it SERVING, and runs until SIGINT/SIGTERM."""
    setup_telemetry(name)
    settings = get_settings()
    host = settings.endpoints.host
    start_metrics_server(name, host, settings.metrics_port)
    server = create_server(name, interceptors)
    service_names = await register(server)
    health_servicer = add_health_and_reflection(server, service_names)
    bound = add_port(server, name, f"{host}:{port}", settings)  # TLS / mTLS when settings.tls.enabled
    if bound == 0:
        raise RuntimeError(f"{name}: cannot bind {host}:{port}")
    await server.start()
    for svc in ["", *service_names]:
        await health_servicer.set(svc, health_pb2.HealthCheckResponse.SERVING)
    frozen = freeze_startup_heap()  # set-up done: full collections walk only what answers make (runtime.heap)
    log.info("%s serving on %s:%d (%d objects of its set-up frozen)", name, host, port, frozen)

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError):
            pass
    await stop.wait()
    log.info("%s stopping", name)
    await health_servicer.enter_graceful_shutdown()
    await server.stop(grace=2.0)
    if on_stop is not None:
        await on_stop()
    shutdown_telemetry()


# gRPC's own retry policy: every internal RPC is idempotent (searches, content-hash upserts,
# deletes), so a call that found a peer briefly UNAVAILABLE is retried with backoff. Reads on the query
# path retry once, at once: a search has one deadline, and a part that is down must cost milliseconds
# (the gateway answers UNAVAILABLE within 100 ms when no retrieval leg is up; its breakers do the rest).
QUERY_PATH_METHODS = [
    {"service": "hybridsearch.v1.Bm25Service", "method": "Search"},
    {"service": "hybridsearch.v1.VectorService", "method": "Search"},
    {"service": "hybridsearch.v1.ExpansionService", "method": "Expand"},
    {"service": "hybridsearch.v1.FusionService", "method": "Fuse"},
]
RETRY_SERVICE_CONFIG = json.dumps(
    {
        "methodConfig": [
            {
                "name": QUERY_PATH_METHODS,
                "retryPolicy": {
                    "maxAttempts": 2,
                    "initialBackoff": "0.005s",
                    "maxBackoff": "0.01s",
                    "backoffMultiplier": 2,
                    "retryableStatusCodes": ["UNAVAILABLE"],
                },
            },
            {
                "name": [{}],
                "retryPolicy": {
                    "maxAttempts": 3,
                    "initialBackoff": "0.05s",
                    "maxBackoff": "0.5s",
                    "backoffMultiplier": 2,
                    "retryableStatusCodes": ["UNAVAILABLE"],
                },
            },
        ]
    }
)


RETRY_OPTIONS = [("grpc.service_config", RETRY_SERVICE_CONFIG), ("grpc.enable_retries", 1)]


def internal_channel(address: str, interceptors: list | None = None) -> grpc.aio.Channel:
    """A channel to an internal service with retries, OTel context propagation and large messages allowed;
    mutual TLS when settings.tls.enabled (hybridsearch.security.tls), plaintext otherwise. `interceptors` run
    before the usual ones (tools/perf/hops.py records the calls)."""
    return aio_channel(
        address,
        get_settings(),
        options=[
            *CHANNEL_OPTIONS,
            *RETRY_OPTIONS,
            # A restarted peer is found again within a second, not after minutes of backoff.
            ("grpc.initial_reconnect_backoff_ms", 100),
            ("grpc.min_reconnect_backoff_ms", 100),
            ("grpc.max_reconnect_backoff_ms", 1000),
        ],
        interceptors=[*(interceptors or []), *grpc_client_interceptors()],
    )


insecure_channel = internal_channel  # the earlier name, for code written before TLS
