"""One observed stack for the trace and dashboard tests: every service as its own process, exporting
OTLP traces to a real OpenTelemetry collector (rotel) and serving Prometheus metrics on ports of its own."""

from __future__ import annotations

import pytest
from otel_helpers import OBSERVED_ENV, Collector, new_traceparent
from stacks import gateway_client, running_stack


@pytest.fixture(scope="session")
def collector(tmp_path_factory):
    running = Collector(tmp_path_factory.mktemp("rotel"))
    yield running
    running.stop()


@pytest.fixture(scope="session")
def observed_stack(collector, tmp_path_factory):
    env = {**OBSERVED_ENV, "HYBRIDSEARCH_DATA_DIR": str(tmp_path_factory.mktemp("observed"))}
    with running_stack(env) as running:
        yield running


@pytest.fixture(scope="session")
def observed_gateway(observed_stack):
    with gateway_client(observed_stack) as client:
        yield client


@pytest.fixture(scope="session")
def ingest_trace(observed_gateway):
    """The sample corpus, indexed under a trace of the test's own: (trace id, the caller's span id)."""
    from hybridsearch.cli import SAMPLE_CORPUS
    from hybridsearch.corpus import read_folder
    from hybridsearch.v1 import ingest_pb2

    trace_id, parent_id, metadata = new_traceparent()
    docs = list(read_folder(SAMPLE_CORPUS))
    reply = observed_gateway.ingest_stub.Upsert(ingest_pb2.UpsertRequest(collection="default", documents=docs),
                                                metadata=metadata, timeout=300)
    assert reply.documents_received == len(docs)
    return trace_id, parent_id
