"""One call the gateway makes to a part: a span `gateway.<name>` and its latency in LEG_DURATION."""

from __future__ import annotations

from contextlib import contextmanager

from hybridsearch.runtime import metrics
from hybridsearch.runtime.telemetry import tracer

TRACER = tracer("hybridsearch.gateway")


@contextmanager
def observed(name: str):
    with TRACER.start_as_current_span(f"gateway.{name}") as span, metrics.LEG_DURATION.labels(leg=name).time():
        yield span
