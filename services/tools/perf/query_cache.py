"""Measures the query vector cache (vector/query_cache.py) through a running stack: two closed-loop runs of
one scenario over a dataset's queries, the repeated mix first, then the all-distinct one beside it.

- zipf: each request's query drawn with a Zipf distribution (s = --zipf, 1.0 by default) over the
  dataset's queries in a seeded random order (the query of rank r with probability proportional to
  1 / r^s): repeated traffic, as pages, retries and dashboards make it;
- distinct: each request a query that no request of this command sent before (those the zipf run never
  drew): every embedding a miss, the cost of an answer without repeats and the cache's worst case.

For each run: answers, the hit rate the vector service counted (its /metrics: memory and Redis hits over
lookups, during the run), the share of requests that repeat an earlier one of the run (what an
unbounded cache would hit), the CPU milliseconds per answer of each stack process (/proc; `vector` is
the one the cache saves), and the median `leg.vector.embed` / `leg.vector.embed_cache` (explain). Loopback
only, bounded in requests and seconds. The caches should be empty at the start (a freshly started stack:
`serve all` starts its own Redis without persistence); the reported hit rates show it when they are not.

    .venv/bin/python -m hybridsearch.tools.perf.query_cache --dataset ../shared/datasets/scifact \\
        --requests 600 --workers 2 --max-seconds 60 --json-out var/perf/query-cache.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import urllib.request
from pathlib import Path

import numpy as np
from prometheus_client.parser import text_string_to_metric_families

from hybridsearch.config.settings import Settings, get_settings
from hybridsearch.runtime.metrics import metrics_port
from hybridsearch.tools.perf.load.bounds import check_loopback
from hybridsearch.tools.perf.load.calls import ChannelPool, SearchCall
from hybridsearch.tools.perf.load.drivers import closed_loop
from hybridsearch.tools.perf.load.memory import discover
from hybridsearch.tools.perf.load.recorder import Recorder
from hybridsearch.tools.perf.load.scenarios import (SCENARIOS, bench_collection, load_queries, repeat_share,
                                                   search_requests, zipf_ranks)
from hybridsearch.tools.perf.procs import cpu_ms_per_request, snapshot

MAX_REQUESTS = 5000  # per run
MAX_SECONDS = 300.0  # per run
WARMUP = 5  # requests before the runs, with queries of their own (not the dataset's)
LOOKUPS = "hybridsearch_query_vector_cache_lookups_total"
STAGES = ("leg.vector.embed", "leg.vector.embed_cache", "leg.vector", "gateway total (took_ms)")


def cache_lookups(url: str | None) -> dict[tuple[str, str], float] | None:
    """(level, result) -> count from the vector service's /metrics; None when it cannot be read."""
    if not url:
        return None
    try:
        with urllib.request.urlopen(url, timeout=2) as reply:
            return parse_lookups(reply.read().decode())
    except OSError:
        return None


def parse_lookups(exposition: str) -> dict[tuple[str, str], float]:
    """(level, result) -> count of the query vector cache's lookups in a Prometheus text exposition."""
    return {(s.labels["level"], s.labels["result"]): s.value for family in text_string_to_metric_families(exposition)
            for s in family.samples if s.name == LOOKUPS}


def hit_rate(before: dict | None, after: dict | None) -> dict | None:
    """Hits over lookups between two /metrics readings (memory lookups; Redis's alone when memory is off)."""
    if before is None or after is None:
        return None
    delta = {key: after.get(key, 0.0) - before.get(key, 0.0) for key in after}
    memory = delta.get(("memory", "hit"), 0.0) + delta.get(("memory", "miss"), 0.0)
    redis = sum(v for (level, _), v in delta.items() if level == "redis")
    lookups = memory or redis
    hits = delta.get(("memory", "hit"), 0.0) + delta.get(("redis", "hit"), 0.0)
    return {"lookups": int(lookups), "hits": int(hits), "hit_rate": round(hits / lookups, 4) if lookups else None,
            "by_level": {f"{level}.{result}": int(v) for (level, result), v in sorted(delta.items()) if v}}


async def run(name: str, texts: list[str], args: argparse.Namespace, pool: ChannelPool, pids: dict[str, int],
              metrics_url: str | None) -> dict:
    requests = search_requests(args.scenario, texts, args.collection, args.top_k, explain=True)
    call = SearchCall(pool, requests, args.deadline_ms / 1000)
    loop = asyncio.get_running_loop()
    looked, cpu = cache_lookups(metrics_url), snapshot(pids)
    recorder = Recorder(name, loop.time(), args.deadline_ms / 1000)
    ended = await closed_loop(call, args.workers, args.max_seconds, recorder, asyncio.Event(),
                              drain_s=args.deadline_ms / 1000 + 1, max_requests=len(requests))
    summary = recorder.summary(args.max_seconds, ended)
    sent = texts[: summary["sent"]]
    return {
        "run": name, "requests": summary["sent"], "ok": summary["ok"], "errors": summary["errors"],
        "elapsed_s": summary["elapsed_s"], "answers_per_s": summary["throughput_qps"],
        "distinct_queries": len(set(sent)), "repeat_share": repeat_share(sent),
        "vector_cache": hit_rate(looked, cache_lookups(metrics_url)),
        "cpu_ms_per_answer": cpu_ms_per_request(cpu, snapshot(pids), summary["ok"]),
        "latency_ms": {k: summary["latency_ms"][k] for k in ("p50", "p99")},
        "stages_median_ms": {k: v for k, v in summary["stages_median_ms"].items() if k in STAGES},
    }


async def measure(args: argparse.Namespace, queries: list[str], settings: Settings) -> dict:
    rng = np.random.default_rng(args.seed)
    ranked = [queries[i] for i in rng.permutation(len(queries))]
    zipf = [ranked[r] for r in zipf_ranks(len(ranked), args.requests, args.zipf, rng)]
    drawn = set(zipf)
    distinct = [q for q in ranked if q not in drawn][: args.requests]
    port = metrics_port(settings, "vector")
    metrics_url = args.metrics_url or (f"http://{settings.endpoints.host}:{port}/metrics" if port else None)
    pids = discover()
    pool = ChannelPool(args.address, args.channels)
    try:
        warm = search_requests(args.scenario, [f"warm-up query {i} {args.seed}" for i in range(WARMUP)],
                               args.collection, args.top_k, explain=False)
        for request in warm:
            await pool.search().Search(request, timeout=args.deadline_ms / 1000)
        runs = [await run(f"zipf s={args.zipf:g}", zipf, args, pool, pids, metrics_url),
                await run("distinct", distinct, args, pool, pids, metrics_url)]
    finally:
        await pool.close()
    return {"command": sys.argv, "address": args.address, "collection": args.collection, "scenario": args.scenario,
            "queries": len(queries), "workers": args.workers, "seed": args.seed, "metrics_url": metrics_url,
            "processes": pids, "runs": runs}


def table(report: dict) -> str:
    rows = ["| run | answers | answers/s | distinct queries | repeats | vector cache hit rate | vector CPU ms/answer "
            "| embed ms (median) | embed_cache ms (median) |", "|---|---|---|---|---|---|---|---|---|"]
    for r in report["runs"]:
        cache = r["vector_cache"] or {}
        stages = r["stages_median_ms"]
        rows.append(f"| {r['run']} | {r['ok']} | {r['answers_per_s']} | {r['distinct_queries']} | {r['repeat_share']} "
                    f"| {'n/a' if cache.get('hit_rate') is None else cache['hit_rate']} | {r['cpu_ms_per_answer'].get('vector', 'n/a')} "
                    f"| {stages.get('leg.vector.embed', 'n/a')} | {stages.get('leg.vector.embed_cache', 'n/a')} |")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", type=Path, help="a BEIR folder: its queries, and its collection indexed as bench "
                        "does when needed (default: the sample questions over `default`)")
    parser.add_argument("--collection", help="default: the --dataset's bench collection, else `default`")
    parser.add_argument("--scenario", default="fast", choices=sorted(SCENARIOS))
    parser.add_argument("--zipf", type=float, default=1.0, help="the Zipf exponent s of the repeated run")
    parser.add_argument("--requests", type=int, default=600, help=f"per run, at most {MAX_REQUESTS}")
    parser.add_argument("--max-seconds", type=float, default=60.0, help=f"per run, at most {MAX_SECONDS:.0f}")
    parser.add_argument("--workers", type=int, default=2, help="closed-loop workers")
    parser.add_argument("--channels", type=int, default=2)
    parser.add_argument("--top-k", type=int, default=10)
    parser.add_argument("--deadline-ms", type=float, default=5000.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--address", help="the gateway (loopback only; default from settings)")
    parser.add_argument("--metrics-url", help="the vector service's /metrics (default from settings.metrics_port)")
    parser.add_argument("--json-out", type=Path)
    args = parser.parse_args()
    if not (0 < args.requests <= MAX_REQUESTS and 0 < args.max_seconds <= MAX_SECONDS and 1 <= args.workers <= 64
            and args.zipf > 0):
        parser.error(f"requests 1-{MAX_REQUESTS}, max-seconds up to {MAX_SECONDS:.0f}, workers 1-64, zipf > 0")
    settings = get_settings()
    args.address = check_loopback(args.address or settings.endpoints.addr("gateway"))
    if args.collection is None and args.dataset is None:
        args.collection = "default"
    elif args.collection is None:
        args.collection, indexed = bench_collection(args.dataset, args.address, settings)
        print(f"{args.dataset.name}: collection {args.collection} ({indexed} documents indexed now)", file=sys.stderr)
    queries = load_queries(args.dataset)
    report = asyncio.run(measure(args, queries, settings))
    print(table(report))
    if args.json_out:
        args.json_out.parent.mkdir(parents=True, exist_ok=True)
        args.json_out.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
