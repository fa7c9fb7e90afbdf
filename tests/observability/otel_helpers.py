"""Helpers of the observability tests: the stack's environment, a real rotel collector and a parser of
its debug output, W3C traceparents, polling.

The collector's own debug exporter (`--debug-log traces --debug-log-verbosity detailed`) prints every
span it receives, with its resource; the tests parse that output, so what they check is exactly what
passed through the collector (its pipeline exports to `blackhole`).
"""

from __future__ import annotations

import re
import secrets
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

OTLP_GRPC_PORT, OTLP_HTTP_PORT = 24317, 24318
METRICS_PORT = 24461  # gateway; bm25 +1, vector +2, expansion +3, fusion +4
TRITON_METRICS_PORT = 28102
OBSERVED_ENV = {
    "HYBRIDSEARCH_ENDPOINTS__GATEWAY_PORT": "24051",
    "HYBRIDSEARCH_ENDPOINTS__BM25_PORT": "24052",
    "HYBRIDSEARCH_ENDPOINTS__VECTOR_PORT": "24053",
    "HYBRIDSEARCH_ENDPOINTS__EXPANSION_PORT": "24054",
    "HYBRIDSEARCH_ENDPOINTS__FUSION_PORT": "24055",
    "HYBRIDSEARCH_REDIS__STATE_URL": "redis://127.0.0.1:26479/0",
    "HYBRIDSEARCH_REDIS__CACHE_URL": "redis://127.0.0.1:26478/0",
    "HYBRIDSEARCH_RERANK__TRITON_URL": "127.0.0.1:28101",
    "HYBRIDSEARCH_RERANK__TRITON_HTTP_PORT": "28100",
    "HYBRIDSEARCH_RERANK__TRITON_METRICS_PORT": str(TRITON_METRICS_PORT),
    "HYBRIDSEARCH_EXPANSION__LLM_SERVE": "",
    "HYBRIDSEARCH_METRICS_PORT": str(METRICS_PORT),
    # The chart's topology (fusion a service of its own): its spans, metrics and dashboards are observed here.
    "HYBRIDSEARCH_TOPOLOGY__IN_GATEWAY": "[]",
    "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{OTLP_GRPC_PORT}",
    # Spans leave each process within 200 ms instead of the SDK's 5 s batches.
    "OTEL_BSP_SCHEDULE_DELAY": "200",
}


@dataclass
class Span:
    service: str
    trace_id: str
    span_id: str
    parent_id: str
    name: str
    kind: str
    attributes: dict = field(default_factory=dict)


ATTRIBUTE = re.compile(r"^\s*-> ([^:]+): (\w+)\((.*)\)\s*$")
FIELD = re.compile(r"^\s+(Trace ID|Parent ID|ID|Name|Kind)\s*: ?(.*)$")


def _value(kind: str, raw: str):
    if kind == "Bool":
        return raw == "true"
    if kind == "Int":
        return int(raw)
    if kind == "Double":
        return float(raw)
    return raw


def parse_debug_spans(text: str) -> list[Span]:
    """Spans from rotel's detailed debug log: ResourceSpans blocks (resource attributes, then spans)."""
    spans: list[Span] = []
    resource: dict = {}
    target: dict | None = None
    for line in text.splitlines():
        if line.startswith("ResourceSpans #"):
            resource, target = {}, None
        elif line.startswith("Resource attributes:"):
            target = resource
        elif line.startswith("Span #"):
            spans.append(Span(service=str(resource.get("service.name", "")), trace_id="", span_id="", parent_id="",
                              name="", kind=""))
            target = None
        elif line.startswith("Attributes:"):
            target = spans[-1].attributes if spans else None
        elif (m := ATTRIBUTE.match(line)) and target is not None:
            target[m.group(1)] = _value(m.group(2), m.group(3))
        elif (m := FIELD.match(line)) and spans:
            key = {"Trace ID": "trace_id", "Parent ID": "parent_id", "ID": "span_id", "Name": "name", "Kind": "kind"}
            setattr(spans[-1], key[m.group(1)], m.group(2).strip())
        elif line and not line.startswith(" "):
            target = None  # Events:, Links:, ScopeSpans, log lines: not attributes of ours
    return spans


class Collector:
    """A real rotel collector process on loopback."""

    def __init__(self, workdir: Path) -> None:
        from rotel.agent import Agent

        self.output = workdir / "rotel-debug.log"
        self.proc = subprocess.Popen(
            [str(Agent().agent_path), "start",
             "--otlp-grpc-endpoint", f"127.0.0.1:{OTLP_GRPC_PORT}",
             "--otlp-http-endpoint", f"127.0.0.1:{OTLP_HTTP_PORT}",
             "--exporter", "blackhole", "--debug-log", "traces", "--debug-log-verbosity", "detailed",
             "--pid-file", str(workdir / "rotel.pid"), "--log-file", str(workdir / "rotel.log")],
            stdout=open(self.output, "wb"), stderr=subprocess.STDOUT, start_new_session=True,
        )
        wait_for(lambda: _port_open(OTLP_GRPC_PORT) or self.proc.poll() is not None, 15, "rotel")
        if self.proc.poll() is not None:
            raise RuntimeError(f"rotel exited with {self.proc.returncode}: {self.output.read_text()}")

    def spans(self) -> list[Span]:
        return parse_debug_spans(self.output.read_text(errors="replace"))

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def _port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.3):
            return True
    except OSError:
        return False


def wait_for(check, timeout_s: float, what: str, every_s: float = 0.2):
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if result := check():
            return result
        time.sleep(every_s)
    raise TimeoutError(f"{what}: not ready after {timeout_s:.0f} s")


def new_traceparent() -> tuple[str, str, list[tuple[str, str]]]:
    """A W3C traceparent the test itself starts: (trace id, parent span id, gRPC metadata)."""
    trace_id, span_id = secrets.token_hex(16), secrets.token_hex(8)
    return trace_id, span_id, [("traceparent", f"00-{trace_id}-{span_id}-01")]
