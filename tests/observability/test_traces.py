"""Traces across processes, checked from what passed through a real OpenTelemetry collector (rotel).

Each query carries a W3C traceparent the test starts; the gateway, bm25, vector, expansion and fusion
processes export OTLP to the collector, and the collector's debug output is parsed back into spans.
"""

from __future__ import annotations

import re
import uuid
from collections import defaultdict
from dataclasses import dataclass

import pytest
from otel_helpers import new_traceparent, wait_for

from hybridsearch.runtime import services
from hybridsearch.v1 import search_pb2

pytestmark = pytest.mark.stack

SERVICES = {f"hybridsearch-{name}" for name in services.NAMES}
GATEWAY = "hybridsearch-gateway"
SEARCH_METHOD = "/hybridsearch.v1.SearchService/Search"
OK = search_pb2.LEG_STATE_OK


@dataclass
class SentQuery:
    text: str
    trace_id: str
    parent_id: str
    response: search_pb2.SearchResponse


def _by_trace(spans):
    traces = defaultdict(list)
    for span in spans:
        traces[span.trace_id].append(span)
    return traces


def _complete(trace_spans) -> bool:
    """Every service reported, and every parent named inside the trace has arrived."""
    ids = {s.span_id for s in trace_spans}
    roots = [s for s in trace_spans if s.parent_id not in ids]
    return SERVICES <= {s.service for s in trace_spans} and len(roots) == 1


@pytest.fixture(scope="module")
def traced(observed_gateway, ingest_trace, collector):
    missed = f"which stores receive chunks when documents are ingested {uuid.uuid4().hex[:6]}"
    sent = []
    for text in (missed, "how does the reranker blend scores", missed):  # the third one hits the cache
        trace_id, parent_id, metadata = new_traceparent()
        request = search_pb2.SearchRequest(query=text, rerank=True, explain=True, top_k=20)
        response = observed_gateway.search_stub.Search(request, metadata=metadata, timeout=60)
        sent.append(SentQuery(text, trace_id, parent_id, response))

    def all_arrived():
        traces = _by_trace(collector.spans())
        return traces if all(_complete(traces.get(q.trace_id, [])) for q in sent) else None

    try:
        traces = wait_for(all_arrived, 60, "spans of every query at the collector", every_s=0.5)
    except TimeoutError:  # the tests below say what is missing
        traces = _by_trace(collector.spans())
    return sent, traces, ingest_trace


def test_the_queries_were_answered_with_every_leg(traced):
    sent, _, _ = traced
    for query in sent:
        legs = {leg.name: leg.state for leg in query.response.legs}
        assert legs["bm25"] == OK and legs["vector"] == OK and legs["rerank"] == OK, query.response.legs
        assert not query.response.degraded


def test_one_trace_per_query_across_every_service(traced):
    sent, traces, _ = traced
    assert len({q.trace_id for q in sent}) == len(sent)
    for query in sent:
        spans = traces[query.trace_id]
        assert SERVICES <= {s.service for s in spans}
        entry = [s for s in spans if s.service == GATEWAY and s.name == SEARCH_METHOD]
        assert len(entry) == 1 and entry[0].kind == "SPAN_KIND_SERVER"
        # The caller's W3C traceparent was honoured: the gateway's server span is its child.
        assert entry[0].parent_id == query.parent_id


def test_traces_start_only_at_the_gateway(traced):
    """A hop that dropped the context would start a new trace in the callee: every trace the collector
    saw (ours, and those of callers without a traceparent) has one root, a gateway server span."""
    sent, traces, (ingest_trace, ingest_parent) = traced
    ours = {q.trace_id: q.parent_id for q in sent} | {ingest_trace: ingest_parent}
    for trace_id, spans in traces.items():
        ids = {s.span_id for s in spans}
        roots = [s for s in spans if s.parent_id not in ids]
        assert len(roots) == 1, [(s.service, s.name) for s in roots]
        (root,) = roots
        assert root.service == GATEWAY and root.kind == "SPAN_KIND_SERVER", root
        assert root.parent_id == ours.get(trace_id, "")
    assert SERVICES - {"hybridsearch-expansion", "hybridsearch-fusion"} <= {s.service for s in traces[ingest_trace]}


def test_parent_links_cross_processes(traced):
    sent, traces, _ = traced
    for query in sent:
        spans = traces[query.trace_id]
        by_id = {s.span_id: s for s in spans}
        assert len(by_id) == len(spans)
        edges = set()
        for span in spans:
            if span.parent_id == query.parent_id:
                continue
            parent = by_id.get(span.parent_id)
            assert parent is not None, f"{span.service} {span.name}: parent {span.parent_id} not in the trace"
            if span.kind == "SPAN_KIND_SERVER":
                # Every server span outside the gateway is the child of the matching client call of another process.
                assert parent.kind == "SPAN_KIND_CLIENT" and parent.name == span.name, (parent, span)
                assert parent.service != span.service
                edges.add((parent.service, span.service))
        assert {(GATEWAY, s) for s in SERVICES - {GATEWAY}} <= edges


def _attribute_spans(spans, name):
    return [s for s in spans if s.name == name]


def test_expansion_cache_miss_then_hit(traced):
    sent, traces, _ = traced
    (miss, hit) = (traces[sent[0].trace_id], traces[sent[2].trace_id])
    assert [s.attributes.get("cache.hit") for s in _attribute_spans(miss, "expansion.cache_get")] == [False]
    assert [s.attributes.get("cache.hit") for s in _attribute_spans(hit, "expansion.cache_get")] == [True]
    assert sent[2].response.explain.expansion_cache_hit

    def expansion_calls_bm25(spans):
        by_id = {s.span_id: s for s in spans}
        return any(s.service == "hybridsearch-bm25" and s.kind == "SPAN_KIND_SERVER"
                   and by_id[s.parent_id].service == "hybridsearch-expansion" for s in spans)

    # On a miss expansion probes BM25 itself (a third process in the chain) and stores the result.
    assert expansion_calls_bm25(miss) and _attribute_spans(miss, "expansion.cache_put")
    assert not expansion_calls_bm25(hit) and not _attribute_spans(hit, "expansion.cache_put")


def test_the_triton_call_is_a_client_span_under_rerank(traced):
    sent, traces, _ = traced
    for query in sent:
        spans = traces[query.trace_id]
        by_id = {s.span_id: s for s in spans}
        (infer,) = _attribute_spans(spans, "triton.infer")
        assert infer.service == GATEWAY and infer.kind == "SPAN_KIND_CLIENT"
        assert by_id[infer.parent_id].name == "gateway.rerank"
        reason = {leg.name: leg.reason for leg in query.response.legs}["rerank"]
        assert infer.attributes["rerank.pairs"] == int(re.search(r"(\d+) candidates", reason).group(1))
