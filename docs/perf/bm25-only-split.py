"""Where a BM25-only answer's time goes, against a running stack (`hybridsearch serve all` on a data dir holding the
collection): N sequential SciFact queries (FAST, mode BM25) through the gateway with the sync client, the wall time
and the CPU per answer of the gateway's and the BM25 service's processes (their /proc clocks over the run); then the
gateway's query path alone, QueryPath in this process over channels to the same services (plan, the BM25 call,
fusion of the one list, calibration, previews: no gateway server, admission, catalog or paging order).

    HYBRIDSEARCH_DATA_DIR=... .venv/bin/python docs/perf/bm25-only-split.py COLLECTION [--queries 300]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import time
from pathlib import Path

from hybridsearch.cli.base import gateway_client
from hybridsearch.config.settings import Settings
from hybridsearch.gateway.backends import Backends
from hybridsearch.gateway.query.deadline import Deadline
from hybridsearch.gateway.query.path import QueryPath
from hybridsearch.gateway.query.report import Report
from hybridsearch.gateway.query.request import plan_search
from hybridsearch.reranker.client import RerankerClient
from hybridsearch.runtime.server import internal_channel
from hybridsearch.tools.perf.hops import STUBS
from hybridsearch.tools.perf.speed import SPEED_MODES

QUERIES = Path(__file__).resolve().parents[2].parent / "shared" / "datasets" / "scifact" / "queries.jsonl"
TICK = os.sysconf("SC_CLK_TCK")


def pid_of(service: str) -> int:
    out = subprocess.run(["pgrep", "-f", f"hybridsearch.cli serve {service}$"], capture_output=True, text=True).stdout
    return int(out.split()[0])


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def through_the_gateway(collection: str, queries: list[str]) -> None:
    client = gateway_client()
    pids = {name: pid_of(name) for name in ("gateway", "bm25")}
    for query in queries[:20]:
        client.search(SPEED_MODES["bm25"].request(query, collection, 10))
    before, started = {n: cpu_s(p) for n, p in pids.items()}, time.perf_counter()
    for query in queries:
        client.search(SPEED_MODES["bm25"].request(query, collection, 10))
    wall = (time.perf_counter() - started) / len(queries) * 1000
    cpu = {n: (cpu_s(p) - before[n]) / len(queries) * 1000 for n, p in pids.items()}
    print(f"through the gateway: {wall:.2f} ms an answer (mean wall); CPU ms an answer: gateway {cpu['gateway']:.2f}, "
          f"bm25 {cpu['bm25']:.2f}")


async def query_path_alone(collection: str, queries: list[str]) -> None:
    settings = Settings()
    channels = {name: internal_channel(settings.endpoints.addr(name)) for name in STUBS}
    backends = Backends(**{n: STUBS[n](c) for n, c in channels.items()}, reranker=RerankerClient(settings.rerank),
                        channels=list(channels.values()))
    path = QueryPath(settings, backends)

    async def run(batch: list[str]) -> tuple[float, float]:
        cpu, wall = time.process_time(), time.perf_counter()
        for query in batch:
            plan = plan_search(SPEED_MODES["bm25"].request(query, collection, 10), settings)
            await path.answer(plan, Deadline(30.0), Report())
        return (time.process_time() - cpu) / len(batch) * 1000, (time.perf_counter() - wall) / len(batch) * 1000
    try:
        await run(queries[:20])
        for _ in range(2):
            cpu, wall = await run(queries)
            print(f"the query path in this process: {cpu:.2f} ms of its CPU an answer (the BM25 call's client side "
                  f"included), {wall:.2f} ms wall")
    finally:
        await backends.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("collection")
    parser.add_argument("--queries", type=int, default=300)
    args = parser.parse_args()
    queries = [json.loads(line)["text"] for line in QUERIES.open()][:args.queries]
    through_the_gateway(args.collection, queries)
    asyncio.run(query_path_alone(args.collection, queries))


if __name__ == "__main__":
    main()
