"""OpenTelemetry switched on by environment.

Tracing is on when OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, or
OTEL_TRACES_EXPORTER=console) is set. Otherwise the API's no-op tracer is used, no gRPC interceptor
is installed, and a span costs almost nothing.

With tracing on, W3C trace context (traceparent) travels over gRPC metadata through the client and
server interceptors of opentelemetry-instrumentation-grpc: a query is one trace across every process.
Health checks and reflection are not traced (they would be a trace each, every few seconds).
"""

from __future__ import annotations

import logging
import os

from opentelemetry import propagate, trace

log = logging.getLogger(__name__)
_configured = False
_provider = None
UNTRACED_SERVICES = ("grpc.health.v1.Health", "grpc.reflection.v1alpha.ServerReflection",
                     "grpc.reflection.v1.ServerReflection")


def setup_telemetry(service_name: str) -> bool:
    """Installs the SDK tracer provider when the environment asks for it; True when tracing is on."""
    global _configured, _provider
    if _configured:
        return _provider is not None
    _configured = True
    if not tracing_enabled():
        return False
    endpoint = _otlp_endpoint()
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter

    provider = TracerProvider(
        resource=Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME", f"hybridsearch-{service_name}")})
    )
    if endpoint:
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    else:
        provider.add_span_processor(BatchSpanProcessor(ConsoleSpanExporter()))
    trace.set_tracer_provider(provider)
    _provider = provider
    log.info("OpenTelemetry tracing on for %s", service_name)
    return True


def _otlp_endpoint() -> str | None:
    return os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")


def tracing_enabled() -> bool:
    """Read from the environment, not from setup: channels and servicers made before setup_telemetry
    get interceptors and proxy tracers that use the provider once it is installed."""
    return bool(_otlp_endpoint()) or os.environ.get("OTEL_TRACES_EXPORTER") == "console"


def shutdown_telemetry() -> None:
    """Exports the spans still batched; called when a server stops."""
    if _provider is not None:
        _provider.shutdown()


def _untraced_filter():
    from opentelemetry.instrumentation.grpc import filters

    return filters.negate(filters.any_of(*(filters.service_name(s) for s in UNTRACED_SERVICES)))


def grpc_server_interceptors() -> list:
    if not tracing_enabled():
        return []
    try:
        from opentelemetry.instrumentation.grpc import aio_server_interceptor
    except ImportError:  # instrumentation not installed: tracing stays in-process
        log.warning("opentelemetry-instrumentation-grpc is not installed: traces stop at process boundaries")
        return []
    return [aio_server_interceptor(filter_=_untraced_filter())]


def grpc_client_interceptors() -> list:
    if not tracing_enabled():
        return []
    try:
        from opentelemetry.instrumentation.grpc import aio_client_interceptors
    except ImportError:
        return []
    return list(aio_client_interceptors(filter_=_untraced_filter()))


def inject_headers(headers: dict[str, str] | None = None) -> dict[str, str]:
    """The current trace context as W3C headers, for calls made without a traced gRPC channel (Triton)."""
    headers = dict(headers or {})
    if tracing_enabled():
        propagate.inject(headers)
    return headers


def tracer(name: str) -> trace.Tracer:
    return trace.get_tracer(name)
