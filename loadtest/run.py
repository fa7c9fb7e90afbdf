"""Closed-loop load against a running gateway: N concurrent clients for T seconds (bounded), loopback.

    .venv/bin/python loadtest/run.py --queries ../shared/datasets/scifact/queries.jsonl \
        --collection bench-scifact --concurrency 4 --seconds 30 --effort fast

Prints one JSON object: requests, errors, QPS, latency p50/p95/p99 (ms).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import statistics
import time

import grpc

from hybridsearch.bench import percentile
from hybridsearch.client import EFFORTS, MODES
from hybridsearch.corpus import read_queries
from hybridsearch.v1 import search_pb2, search_pb2_grpc

MAX_REQUESTS = 100_000


async def worker(stub, queries, args, deadline, latencies, errors):
    while time.monotonic() < deadline and len(latencies) + len(errors) < MAX_REQUESTS:
        request = search_pb2.SearchRequest(query=next(queries), collection=args.collection, top_k=args.top_k,
                                           mode=MODES[args.mode], effort=EFFORTS[args.effort])
        start = time.perf_counter()
        try:
            await stub.Search(request, timeout=30)
            latencies.append((time.perf_counter() - start) * 1000)
        except grpc.aio.AioRpcError as err:
            errors.append(err.code().name)


async def main(args) -> dict:
    if not args.address.startswith(("127.", "localhost", "[::1]")):
        raise SystemExit("load tests target loopback addresses only")
    from pathlib import Path

    texts = list(read_queries(Path(args.queries).parent).values())
    queries = itertools.cycle(texts)
    latencies: list[float] = []
    errors: list[str] = []
    async with grpc.aio.insecure_channel(args.address) as channel:
        stub = search_pb2_grpc.SearchServiceStub(channel)
        started = time.monotonic()
        deadline = started + args.seconds
        await asyncio.gather(*(worker(stub, queries, args, deadline, latencies, errors) for _ in range(args.concurrency)))
        elapsed = time.monotonic() - started
    return {
        "concurrency": args.concurrency, "seconds": round(elapsed, 1), "requests": len(latencies), "errors": len(errors),
        "qps": round(len(latencies) / elapsed, 1),
        "p50_ms": round(statistics.median(latencies), 1) if latencies else None,
        "p95_ms": round(percentile(latencies, 0.95), 1), "p99_ms": round(percentile(latencies, 0.99), 1),
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--address", default="127.0.0.1:50051")
    parser.add_argument("--queries", required=True, help="a BEIR queries.jsonl")
    parser.add_argument("--collection", default="default")
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--top-k", type=int, default=10)
    parser.add_argument("--mode", default="hybrid", choices=list(MODES))
    parser.add_argument("--effort", default="balanced", choices=list(EFFORTS))
    print(json.dumps(asyncio.run(main(parser.parse_args()))))
