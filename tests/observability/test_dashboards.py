"""Every query of every generated Grafana dashboard returns data from a real Prometheus (the Debian
package's binary) scraping the running stack's services and Triton."""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
import time
from pathlib import Path

import httpx
import pytest
from otel_helpers import METRICS_PORT, TRITON_METRICS_PORT, wait_for

from hybridsearch.runtime.metrics import METRICS_PORT_OFFSETS
from hybridsearch.observability.dashboards import build_dashboards, panel_queries
from hybridsearch.v1 import common_pb2, search_pb2

pytestmark = pytest.mark.stack

REPO = Path(__file__).resolve().parents[2]
COMMITTED = REPO / "charts" / "hybridsearch" / "files" / "dashboards"
PROMETHEUS_PORT = 29090
PROMETHEUS = f"http://127.0.0.1:{PROMETHEUS_PORT}"
SCRAPE_S = 1


def _query(expr: str, at: float | None = None) -> list[dict]:
    params = {"query": expr, **({"time": at} if at else {})}
    reply = httpx.get(f"{PROMETHEUS}/api/v1/query", params=params, timeout=10).json()
    assert reply["status"] == "success", (expr, reply)
    return reply["data"]["result"]


def _values(result: list[dict]) -> list[float]:
    return [float(sample["value"][1]) for sample in result]


@pytest.fixture(scope="module")
def prometheus(observed_stack, tmp_path_factory):
    binary = shutil.which("prometheus")
    assert binary, "Prometheus is not installed: `make test` installs it (scripts/system-packages.sh prometheus)"
    workdir = tmp_path_factory.mktemp("prometheus")
    services = [f"127.0.0.1:{METRICS_PORT + offset}" for offset in METRICS_PORT_OFFSETS.values()]
    config = {  # JSON is YAML
        "global": {"scrape_interval": f"{SCRAPE_S}s", "evaluation_interval": f"{SCRAPE_S}s"},
        "scrape_configs": [
            {"job_name": "hybridsearch", "static_configs": [{"targets": services}]},
            {"job_name": "triton", "static_configs": [{"targets": [f"127.0.0.1:{TRITON_METRICS_PORT}"]}]},
        ],
    }
    (workdir / "prometheus.yml").write_text(json.dumps(config))
    proc = subprocess.Popen(
        [binary, f"--config.file={workdir / 'prometheus.yml'}", f"--storage.tsdb.path={workdir / 'data'}",
         f"--web.listen-address=127.0.0.1:{PROMETHEUS_PORT}"],
        stdout=open(workdir / "prometheus.log", "wb"), stderr=subprocess.STDOUT, start_new_session=True,
    )
    try:
        wait_for(lambda: _ready(proc), 30, "prometheus")
        # Every target scraped and up before any traffic: rates then start from a sample before it.
        wait_for(lambda: len(_values(_query("up == 1"))) == len(services) + 1, 30, "every target up")
        yield proc
    finally:
        proc.terminate()
        proc.wait(timeout=15)


def _ready(proc) -> bool:
    if proc.poll() is not None:
        raise RuntimeError(f"prometheus exited with {proc.returncode}")
    try:
        return httpx.get(f"{PROMETHEUS}/-/ready", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def _search(gateway, text, **kwargs):
    return gateway.search(search_pb2.SearchRequest(query=text, **kwargs))


@pytest.fixture(scope="module")
def traffic(prometheus, observed_stack, observed_gateway, ingest_trace):
    """Two rounds of searches (the second hits the expansion cache), bad requests, and searches while
    the fusion service is down; returns when Prometheus has scraped all of it."""
    import grpc

    started = time.time()
    queries = ["how are variant queries weighted in rank fusion", "cross-encoder reranking on GPUs",
               "which stores receive chunks when documents are ingested"]
    answered, pools = 0, []
    for _ in range(2):
        for text in queries:
            reranked = _search(observed_gateway, text, rerank=True)
            pools.append(int(re.search(r"(\d+) candidates", {l.name: l.reason for l in reranked.legs}["rerank"]).group(1)))
            _search(observed_gateway, text, effort=common_pb2.EFFORT_FAST)
            _search(observed_gateway, text, mode=common_pb2.RETRIEVAL_MODE_BM25)
            answered += 3
        for bad in (search_pb2.SearchRequest(query=""), search_pb2.SearchRequest(query="q", top_k=0)):
            with pytest.raises(grpc.RpcError):
                observed_gateway.search(bad, timeout=10)
        time.sleep(3 * SCRAPE_S)
    observed_stack.stop_one("fusion")
    degraded = [_search(observed_gateway, text, effort=common_pb2.EFFORT_FAST) for text in queries]
    answered += len(degraded)
    assert all(r.degraded for r in degraded)
    observed_stack.start_service("fusion")

    wait_for(lambda: _values(_query("sum(hybridsearch_searches_total)")) == [answered], 30, "searches scraped")
    time.sleep(2 * SCRAPE_S)
    return {"started": started, "ended": time.time(), "pools": pools, "degraded": len(degraded)}


def _substitute(expr: str, window_s: int) -> str:
    # Grafana replaces $__rate_interval with a window of at least four scrapes; here one window spans
    # all the test's traffic, so an instant query at its end sees every increase.
    return expr.replace("$__rate_interval", f"{window_s}s")


def test_committed_dashboards_are_the_generated_ones():
    generated = build_dashboards()
    assert set(generated) == {"hybridsearch-search", "hybridsearch-services"}
    for uid, model in generated.items():
        committed = json.loads((COMMITTED / f"{uid}.json").read_text())
        assert committed == model, f"{uid}.json is stale: run `hybridsearch dashboards`"


def test_every_dashboard_query_returns_data(traffic):
    window = int(time.time() - traffic["started"]) + 10
    checked = 0
    for uid, model in build_dashboards().items():
        queries = panel_queries(model)
        assert queries, uid
        for title, expr in queries:
            result = _query(_substitute(expr, window))
            values = _values(result)
            assert result, f"{uid} / {title}: no data for {expr}"
            assert any(math.isfinite(v) for v in values), f"{uid} / {title}: only NaN for {expr}"
            checked += 1
    assert checked >= 20


def test_the_numbers_are_the_traffic(traffic):
    window = f"{int(time.time() - traffic['started']) + 10}s"
    # Round one missed the expansion cache, round two hit it.
    lookups = {s["metric"]["result"]: float(s["value"][1]) for s in _query(
        f"sum by (result) (increase(hybridsearch_expansion_cache_lookups_total[{window}]))")}
    assert lookups["hit"] > 0 and lookups["miss"] > 0
    # Degraded answers were counted against the leg that was down.
    degraded = {s["metric"]["leg"]: float(s["value"][1]) for s in _query(
        f"sum by (leg) (increase(hybridsearch_search_degraded_total[{window}]))")}
    assert degraded["fusion"] > 0 and degraded["bm25"] == 0 and degraded["vector"] == 0
    # The mean rerank pool is the mean of the pools the answers reported.
    (mean,) = _values(_query(f"sum(increase(hybridsearch_rerank_pool_size_sum[{window}])) / "
                             f"sum(increase(hybridsearch_rerank_pool_size_count[{window}]))"))
    assert mean == pytest.approx(sum(traffic["pools"]) / len(traffic["pools"]))
    # Triton's own metrics saw one model execution per reranked search, or fewer when batched.
    (triton,) = _values(_query(f"sum(increase(nv_inference_request_success[{window}]))"))
    assert triton >= len(traffic["pools"]) * 0.9
    # Invalid requests show up as INVALID_ARGUMENT on the gateway's Search method.
    invalid = _values(_query('sum(hybridsearch_rpc_duration_seconds_count{server="gateway", '
                             'grpc_method="Search", grpc_code="INVALID_ARGUMENT"})'))
    assert invalid == [4.0]
