"""Grafana dashboards as code, built with Grafana's own grafana-foundation-sdk.

`hybridsearch dashboards --out charts/hybridsearch/files/dashboards` writes one JSON file per
dashboard; the Helm chart ships them to Grafana's dashboard sidecar. Every query reads the metrics
of hybridsearch.runtime.metrics and Triton's own /metrics; tests/observability/test_dashboards.py runs
each one against a real Prometheus scraping a running stack.
"""

from __future__ import annotations

import json
from pathlib import Path

from grafana_foundation_sdk.builders.dashboard import Dashboard, DatasourceVariable, Row
from grafana_foundation_sdk.builders.prometheus import Dataquery
from grafana_foundation_sdk.builders.stat import Panel as Stat
from grafana_foundation_sdk.builders.timeseries import Panel as Timeseries
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models.dashboard import DataSourceRef

DATASOURCE = DataSourceRef(type_val="prometheus", uid="${datasource}")
RATE = "$__rate_interval"
QUANTILES = (0.5, 0.95, 0.99)
TAGS = ["hybridsearch", "generated"]


def rate(selector: str) -> str:
    return f"rate({selector}[{RATE}])"


def query(expr: str, legend: str, ref_id: str) -> Dataquery:
    return Dataquery().expr(expr).legend_format(legend).ref_id(ref_id).datasource(DATASOURCE)


def timeseries(title: str, unit: str, targets: list[Dataquery], description: str = "", width: int = 12) -> Timeseries:
    panel = Timeseries().title(title).unit(unit).datasource(DATASOURCE).span(width).height(8)
    if description:
        panel = panel.description(description)
    for target in targets:
        panel = panel.with_target(target)
    return panel


def quantiles(histogram: str, by: str, legend: str, matcher: str = "") -> list[Dataquery]:
    """p50/p95/p99 of a Prometheus histogram, one series per value of the `by` labels."""
    selector = f"{histogram}_bucket{{{matcher}}}" if matcher else f"{histogram}_bucket"
    group = f"le, {by}" if by else "le"
    return [
        query(f"histogram_quantile({q}, sum by ({group}) ({rate(selector)}))", f"{legend} p{int(q * 100)}",
              chr(ord("A") + i))
        for i, q in enumerate(QUANTILES)
    ]


def _base(title: str, uid: str, description: str) -> Dashboard:
    return (
        Dashboard(title).uid(uid).description(description).tags(TAGS).refresh("30s").time("now-1h", "now")
        .with_variable(DatasourceVariable("datasource").label("Prometheus").type("prometheus"))
    )


def search_dashboard() -> Dashboard:
    searches = "hybridsearch_searches_total"
    degraded_searches = 'hybridsearch_searches_total{outcome="degraded"}'
    failed_rpcs = 'hybridsearch_rpc_duration_seconds_count{grpc_code!="OK"}'
    lookups = "hybridsearch_expansion_cache_lookups_total"
    cache_hits = 'hybridsearch_expansion_cache_lookups_total{result="hit"}'
    cache_answers = 'hybridsearch_expansion_cache_lookups_total{result=~"hit|miss"}'
    pool = "hybridsearch_rerank_pool_size"
    return (
        _base("Hybridsearch / Search", "hybridsearch-search",
              "Queries through the gateway: traffic, degraded answers, latency per stage and per leg, "
              "expansion cache and rerank pool.")
        .with_row(Row("Traffic"))
        .with_panel(timeseries("Searches per second", "reqps", [
            query(f"sum by (effort) ({rate(searches)})", "{{effort}}", "A"),
        ], "Answered searches by effort (QPS).", width=8))
        .with_panel(timeseries("Errors per second", "reqps", [
            query(f"sum by (server, grpc_method, grpc_code) ({rate(failed_rpcs)})",
                  "{{server}} {{grpc_method}} {{grpc_code}}", "A"),
        ], "gRPC calls that did not end OK, in every service, by status code.", width=8))
        .with_panel(timeseries("Degraded answers by leg", "reqps", [
            query(f"sum by (leg) ({rate('hybridsearch_search_degraded_total')})", "{{leg}}", "A"),
            query(f"sum({rate(degraded_searches)}) / sum({rate(searches)})", "degraded share", "B"),
        ], "Answers given without a leg that failed or timed out (fusion: fused in the gateway).", width=8))
        .with_row(Row("Latency"))
        .with_panel(timeseries("Search latency per stage", "s",
                               quantiles("hybridsearch_search_stage_duration_seconds", "stage", "{{stage}}"),
                               "Gateway stages: retrieve+expand, variants, fusion, rerank, and the total."))
        .with_panel(timeseries("Latency per leg", "s",
                               quantiles("hybridsearch_search_leg_duration_seconds", "leg", "{{leg}}"),
                               "Each call the gateway makes: bm25, vector (and their variant queries), "
                               "expansion, rerank on Triton."))
        .with_row(Row("Expansion cache and reranking"))
        .with_panel(Stat().title("Expansion cache hit ratio").unit("percentunit").datasource(DATASOURCE)
                    .span(6).height(8).with_target(query(
                        f"sum({rate(cache_hits)}) / sum({rate(cache_answers)})", "hit ratio", "A")))
        .with_panel(timeseries("Expansion cache lookups", "ops", [
            query(f"sum by (result) ({rate(lookups)})", "{{result}}", "A"),
        ], "Redis lookups by result: hit, miss, error (Redis unreachable).", width=6))
        .with_panel(timeseries("Rerank pool size", "short", [
            *quantiles(pool, "", "pool"),
            query(f"sum({rate(pool + '_sum')}) / sum({rate(pool + '_count')})", "mean", "D"),
        ], "Candidates sent to Triton per reranked search."))
    )


def services_dashboard() -> Dashboard:
    rpc = "hybridsearch_rpc_duration_seconds"
    triton_success = "nv_inference_request_success"

    def per_request(counter_us: str) -> str:
        # Triton's duration counters are cumulative microseconds: per-request milliseconds.
        return f"sum by (model) ({rate(counter_us)}) / sum by (model) ({rate(triton_success)}) / 1000"

    return (
        _base("Hybridsearch / Services and Triton", "hybridsearch-services",
              "Every gRPC method of every service, and Triton's own metrics for the reranker.")
        .with_row(Row("gRPC"))
        .with_panel(timeseries("RPCs per second", "reqps", [
            query(f"sum by (server, grpc_method) ({rate(rpc + '_count')})", "{{server}} {{grpc_method}}", "A"),
        ]))
        .with_panel(timeseries("RPC latency", "s", quantiles(rpc, "server, grpc_method", "{{server}} {{grpc_method}}"),
                               "Server-side duration of each method."))
        .with_row(Row("Triton"))
        .with_panel(timeseries("Triton inferences per second", "reqps", [
            query(f"sum by (model) ({rate(triton_success)})", "{{model}} ok", "A"),
            query(f"sum by (model) ({rate('nv_inference_request_failure')})", "{{model}} failed", "B"),
        ], width=8))
        .with_panel(timeseries("Triton queue and compute time per request", "ms", [
            query(per_request("nv_inference_queue_duration_us"), "{{model}} queue", "A"),
            query(per_request("nv_inference_compute_infer_duration_us"), "{{model}} compute", "B"),
            query(per_request("nv_inference_request_duration_us"), "{{model}} total", "C"),
        ], "Time a request waited in Triton's scheduler queue, and the model's compute time.", width=8))
        .with_panel(timeseries("Triton batch size", "short", [
            query(f"sum by (model) ({rate('nv_inference_count')}) / sum by (model) ({rate('nv_inference_exec_count')})",
                  "{{model}} pairs per execution", "A"),
        ], "Inferences (query-passage pairs) per model execution: what dynamic batching achieves.", width=8))
    )


def build_dashboards() -> dict[str, dict]:
    """Dashboards by uid, as the JSON Grafana imports."""
    encoder = JSONEncoder(sort_keys=True, indent=2)
    dashboards = {}
    for builder in (search_dashboard(), services_dashboard()):
        model = json.loads(encoder.encode(builder.build()))
        dashboards[model["uid"]] = model
    return dashboards


def panel_queries(model: dict) -> list[tuple[str, str]]:
    """(panel title, PromQL) of every target of every panel, rows included."""
    found = []
    for panel in model.get("panels", []):
        for inner in [panel, *panel.get("panels", [])]:
            for target in inner.get("targets") or []:
                if target.get("expr"):
                    found.append((inner.get("title", ""), target["expr"]))
    return found


def write_dashboards(out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for uid, model in build_dashboards().items():
        path = out / f"{uid}.json"
        path.write_text(json.dumps(model, indent=2, sort_keys=True) + "\n")
        written.append(path)
    return written
