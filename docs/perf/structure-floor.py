"""The structure's floor: what an answer would cost if every service did nothing but its engine's work.

The same processes and calls as the stack's BM25-only and FAST answers (a client; a gateway; BM25, vector and fusion
services, each a process of its own), every one a bare grpc.aio server answering bytes of the recorded sizes (the hop
table's), neither side parsing anything; each service's engine work done as busy CPU in a thread (as the services
run their engines), costing what the in-process baseline spends on it (its BM25 0.17 ms; everything else of its
answer, the query embedding included, in the vector service). The gateway fans out as the query path does: BM25-only
calls BM25; FAST calls BM25 and vector at once, then fusion (or not: fusion inside the gateway). The client is a bare sync stub (bytes in, bytes out).

What it prints per mode: p50 and p99 wall of sequential answers, back to back and then with a pause between them (as
`hybridsearch speed` lets the processes settle between calls: threads gone idle are woken for each answer, which costs
more), and the CPU per answer of all the processes together (the client's included), against the baseline's CPU. No Python of ours runs in it: where the stack's goal sits below
this floor, no cut inside the services reaches it; only fewer processes on the path would.

    .venv/bin/python docs/perf/structure-floor.py [--answers 600] [--baseline-cpu-ms 6.5] [--pause-ms 5]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import socket
import statistics
import time

import grpc
import psutil

from hybridsearch.tools.perf.hops import ECHO_METHOD, serve_bytes

SIZES = {  # bytes, from the hop table (docs/performance.md, issue 35): request, answer
    "client": (160, 8_000), "bm25": (162, 38_488), "vector": (181, 51_246), "fusion": (10_444, 7_418)}


def busy(seconds: float) -> None:
    started = time.thread_time()
    while time.thread_time() - started < seconds:
        pass


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve_engine(port: int, answer_bytes: int, engine_s: float, ready) -> None:
    """A service: its engine's work in a thread, then bytes of its answer's size."""
    answer = b"\x0a" * answer_bytes

    async def call(request: bytes, context) -> bytes:
        if engine_s:
            await asyncio.to_thread(busy, engine_s)
        return answer
    asyncio.run(serve_bytes(port, call, ready))


def serve_gateway(port: int, ports: dict[str, int], ready) -> None:
    """The gateway: the first byte of a request names the mode (b"b": BM25 only, b"f": FAST, b"g": FAST with fusion
    inside the gateway)."""
    async def run() -> None:
        channels = {name: grpc.aio.insecure_channel(f"127.0.0.1:{p}") for name, p in ports.items()}
        calls = {name: ch.unary_unary(ECHO_METHOD, request_serializer=None, response_deserializer=None)
                 for name, ch in channels.items()}
        bodies = {name: b"\x0a" * SIZES[name][0] for name in ports}
        answer = b"\x0a" * SIZES["client"][1]

        async def search(request: bytes, context) -> bytes:
            if request[:1] == b"b":
                await calls["bm25"](bodies["bm25"])
            else:
                await asyncio.gather(calls["bm25"](bodies["bm25"]), calls["vector"](bodies["vector"]))
                if request[:1] == b"f":  # b"g": fusion inside the gateway (no hop; its library's CPU is not counted)
                    await calls["fusion"](bodies["fusion"])
            return answer
        await serve_bytes(port, search, ready)
    asyncio.run(run())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--answers", type=int, default=600)
    parser.add_argument("--baseline-cpu-ms", type=float, default=6.5, help="the in-process baseline's CPU a query")
    parser.add_argument("--baseline-bm25-ms", type=float, default=0.17, help="the baseline's BM25 share")
    parser.add_argument("--pause-ms", type=float, default=5.0,
                        help="the second round's quiet between answers (speed's: the processes settle between calls)")
    args = parser.parse_args()
    spawn = multiprocessing.get_context("spawn")
    engines = {"bm25": args.baseline_bm25_ms, "vector": args.baseline_cpu_ms - args.baseline_bm25_ms, "fusion": 0.0}
    ports = {name: free_port() for name in engines}
    procs = []
    for name, engine_ms in engines.items():
        ready = spawn.Event()
        procs.append(spawn.Process(target=serve_engine, args=(ports[name], SIZES[name][1], engine_ms / 1e3, ready),
                                   daemon=True))
        procs[-1].start()
        ready.wait(30)
    gateway_port, ready = free_port(), spawn.Event()
    procs.append(spawn.Process(target=serve_gateway, args=(gateway_port, ports, ready), daemon=True))
    procs[-1].start()
    ready.wait(30)
    watched = [psutil.Process(p.pid) for p in procs] + [psutil.Process()]
    channel = grpc.insecure_channel(f"127.0.0.1:{gateway_port}")
    call = channel.unary_unary(ECHO_METHOD, request_serializer=None, response_deserializer=None)
    try:
        for pause_ms in (0.0, args.pause_ms):
            for mode, first in (("BM25 only", b"b"), ("FAST", b"f"), ("FAST, fusion in the gateway", b"g")):
                body = first + b"\x0a" * (SIZES["client"][0] - 1)
                for _ in range(100):
                    call(body)
                before = sum(sum(p.cpu_times()[:2]) for p in watched)
                walls = []
                for _ in range(args.answers):
                    time.sleep(pause_ms / 1e3)
                    started = time.perf_counter()
                    call(body)
                    walls.append((time.perf_counter() - started) * 1e3)
                time.sleep(0.2)  # trailing work done
                cpu = (sum(sum(p.cpu_times()[:2]) for p in watched) - before) / args.answers * 1e3
                q = statistics.quantiles(walls, n=100)
                engine = engines["bm25"] if first == b"b" else sum(engines.values())
                print(f"{mode}, {pause_ms:g} ms between answers: p50 {q[49]:.2f} ms, p99 {q[98]:.2f} ms; CPU an answer "
                      f"{cpu:.2f} ms (engines {engine:.2f}), {cpu / args.baseline_cpu_ms:.2f}x the baseline's "
                      f"{args.baseline_cpu_ms} ms")
    finally:
        channel.close()
        for p in procs:
            p.terminate()


if __name__ == "__main__":
    main()
