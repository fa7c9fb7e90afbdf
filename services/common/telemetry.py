"""OpenTelemetry switched on by environment.

Tracing is on when OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_TRACES_EXPORTER=console) is set; otherwise
the API's no-op tracer is used and spans cost almost nothing. W3C trace context travels over gRPC
metadata through the client/server interceptors of opentelemetry-instrumentation-grpc when present.
"""

from __future__ import annotations

import logging
import os

from opentelemetry import trace

log = logging.getLogger(__name__)
_configured = False


def setup_telemetry(service_name: str) -> None:
    global _configured
    if _configured:
        return
    _configured = True
    endpoint = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or os.environ.get(
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
    )
    console = os.environ.get("OTEL_TRACES_EXPORTER") == "console"
    if not endpoint and not console:
        return
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
    log.info("OpenTelemetry tracing on for %s", service_name)


def grpc_server_interceptors() -> list:
    try:
        from opentelemetry.instrumentation.grpc import aio_server_interceptor
    except ImportError:  # instrumentation not installed: tracing stays in-process
        return []
    return [aio_server_interceptor()]


def grpc_client_interceptors() -> list:
    try:
        from opentelemetry.instrumentation.grpc import aio_client_interceptors
    except ImportError:
        return []
    return list(aio_client_interceptors())


def tracer(name: str) -> trace.Tracer:
    return trace.get_tracer(name)
