"""The hop table: for each internal RPC a search makes, the CPU it costs on both sides, against its engine's own
work and against a bare gRPC echo of the same message sizes (docs/performance.md, "The hop table").

    hybridsearch hops ../shared/datasets/scifact --modes fast,balanced --queries 30 --calls 300

1. **Capture.** The gateway's query path (gateway/query/path.py QueryPath) runs in this process over channels
   to the running stack's services, every call recorded by a client interceptor: the internal RPCs of real
   answers, as the gateway makes them, with how many of each an answer makes.
2. **Replay.** Each RPC's recorded requests are sent again one at a time, `calls` calls in all; the CPU of this
   process (the calling side) and of the service's process (/proc) per call, and the engine's own time per
   call as the service reports it in its answer (LegSearchResponse.timings_ms: the engine, the query
   embedding; a service that reports none counts 0).
   The fusion service reports no engine time: its library's CPU on the same requests is measured here, in
   this process (fusion_engine_ms). GetChunks and Expand report none either: their engine counts 0, so their
   ratio is an upper bound (Expand's replays meet its Redis cache, as a repeated query does).
3. **Echo.** A bare grpc.aio server in a process of its own answers bytes of the recorded answer's size to a
   request of the recorded request's size, neither side parsing anything: the floor of one call of those sizes.
   Then the same echo lasting as long as the engine worked (its server awaits that long before answering): a
   call that waits costs gRPC more CPU than one answered at once (both sides' threads go idle and are woken:
   0.2 -> 0.6 ms on the serving side for a 10 ms wait here), and that is no work of ours either.

The tax of a hop is (calling side + serving side - engine) / echo: 1.0 is a call that costs what gRPC itself
costs; the issue's goal is at most 2. The waiting tax divides by the echo that lasts as long.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass

import grpc
import psutil

from hybridsearch.config.settings import Settings
from hybridsearch.gateway.backends import Backends
from hybridsearch.gateway.query.deadline import Deadline
from hybridsearch.gateway.query.report import Report
from hybridsearch.gateway.query.request import plan_search
from hybridsearch.gateway.query.path import QueryPath
from hybridsearch.runtime.server import internal_channel
from hybridsearch.tools.perf.hop import against_server
from hybridsearch.tools.perf.procs import stack_processes
from hybridsearch.tools.perf.speed import SPEED_MODES
from hybridsearch.v1 import bm25_pb2_grpc, expansion_pb2_grpc, fusion_pb2_grpc, vector_pb2_grpc

WARMUP = 30  # replayed calls before the clocks start (channels, caches, the allocator)
ECHO_METHOD = "/hops.Echo/Call"


@dataclass
class Recorded:
    """One RPC as the gateway makes it: the service, its method, each recorded request and answer (serialised)."""

    service: str
    method: str
    requests: list[bytes]
    answers: list[bytes]
    per_answer: dict[str, float]  # mode -> calls an answer of that mode makes

    @property
    def name(self) -> str:
        return f"{self.service}.{self.method.rsplit('/', 1)[-1]}"


class _Recorder(grpc.aio.UnaryUnaryClientInterceptor):
    """Records every unary call made through the channel: its method, its request and its answer, as bytes."""

    def __init__(self, service: str, into: list) -> None:
        self.service, self.into = service, into

    async def intercept_unary_unary(self, continuation, client_call_details, request):
        call = await continuation(client_call_details, request)
        answer = await call
        method = client_call_details.method.decode() if isinstance(client_call_details.method, bytes) \
            else client_call_details.method
        self.into.append((self.service, method, request.SerializeToString(), answer.SerializeToString()))
        return call


STUBS = {"bm25": bm25_pb2_grpc.Bm25ServiceStub, "vector": vector_pb2_grpc.VectorServiceStub,
         "expansion": expansion_pb2_grpc.ExpansionServiceStub, "fusion": fusion_pb2_grpc.FusionServiceStub}


async def capture(settings: Settings, queries: list[str], collection: str, modes: list[str]) -> list[Recorded]:
    """The internal RPCs the query path makes for each query in each mode, recorded (first pages, no rerank
    on this stack's CPU unless the mode reranks)."""
    calls: dict[str, list] = {}
    for mode in modes:
        made: list = []
        # the gateway's backends as its topology makes them (a part inside the gateway makes no hop: its calls
        # are the ones it makes itself, an in-process expansion's BM25 probes), every call through a recorder
        backends = Backends.connect(settings, lambda name: internal_channel(settings.endpoints.addr(name),
                                                                            interceptors=[_Recorder(name, made)]))
        await backends.start()
        path = QueryPath(settings, backends)
        try:
            for query in queries:
                request = SPEED_MODES[mode].request(query, collection, 10)
                await path.answer(plan_search(request, settings), Deadline(30.0), Report())
        finally:
            await backends.close()
        calls[mode] = made
    by_rpc: dict[tuple[str, str], Recorded] = {}
    for mode, made in calls.items():
        counts: dict[tuple[str, str], int] = defaultdict(int)
        for service, method, request, answer in made:
            key = (service, method)
            counts[key] += 1
            rpc = by_rpc.setdefault(key, Recorded(service, method, [], [], {}))
            rpc.requests.append(request)
            rpc.answers.append(answer)
        for key, n in counts.items():
            by_rpc[key].per_answer[mode] = n / len(queries)
    return list(by_rpc.values())


@dataclass
class HopRow:
    rpc: str
    per_answer: dict[str, float]
    request_bytes: int  # medians of the recorded calls
    answer_bytes: int
    calls: int
    caller_cpu_ms: float  # per call, this process: the calling side
    server_cpu_ms: float  # per call, the service's process
    engine_ms: float  # per call, the engine's own time as the service reports it
    echo_caller_cpu_ms: float  # per call, a bare echo of the same sizes
    echo_server_cpu_ms: float
    waiting_echo_cpu_ms: float = 0.0  # per call, both sides, the same echo answered after the engine's time

    @property
    def hop_cpu_ms(self) -> float:
        return self.caller_cpu_ms + self.server_cpu_ms

    @property
    def echo_cpu_ms(self) -> float:
        return self.echo_caller_cpu_ms + self.echo_server_cpu_ms

    @property
    def tax(self) -> float:
        """(hop CPU - engine) / echo CPU: 1.0 is gRPC's own cost, nothing of ours."""
        return (self.hop_cpu_ms - self.engine_ms) / self.echo_cpu_ms if self.echo_cpu_ms else float("nan")

    @property
    def waiting_tax(self) -> float:
        """(hop CPU - engine) / the CPU of an echo that lasts as long as the engine worked."""
        echo = self.waiting_echo_cpu_ms or self.echo_cpu_ms
        return (self.hop_cpu_ms - self.engine_ms) / echo if echo else float("nan")

    def as_dict(self) -> dict:
        return asdict(self) | {"hop_cpu_ms": round(self.hop_cpu_ms, 3), "echo_cpu_ms": round(self.echo_cpu_ms, 3),
                               "tax": round(self.tax, 2), "waiting_tax": round(self.waiting_tax, 2)}


def fusion_engine_ms(requests: list[bytes], calls: int) -> float:
    """The fusion library's own CPU per call on the recorded requests, in this process: fuse() of the lists
    already made Rankings (what the service does around it, parsing and building protos, is the hop's)."""
    from hybridsearch.fusion.methods import fuse
    from hybridsearch.fusion.params import params_from_proto
    from hybridsearch.fusion.service import rankings_of
    from hybridsearch.v1 import fusion_pb2

    inputs = []
    for body in requests:
        request = fusion_pb2.FuseRequest.FromString(body)
        inputs.append((rankings_of(list(request.lists), not request.omit_text)[0], params_from_proto(request.config),
                       request.limit))
    for i in range(WARMUP):
        fuse(*inputs[i % len(inputs)])
    started = time.process_time()
    for i in range(calls):
        fuse(*inputs[i % len(inputs)])
    return (time.process_time() - started) / calls * 1e3


def _engine_ms(answer: bytes, method: str) -> float:
    """The engine's own time in a leg answer (timings_ms: engine, embed); 0 for answers that carry none."""
    from hybridsearch.v1 import common_pb2

    if not method.endswith(("/Search", "/TagSearch")):
        return 0.0
    parsed = common_pb2.LegSearchResponse.FromString(answer)
    return sum(parsed.timings_ms.values())


async def _replay(settings: Settings, rpc: Recorded, calls: int) -> tuple[float, float, float]:
    """(caller CPU s, wall s, engine ms summed) of `calls` replayed calls, after WARMUP."""
    async with internal_channel(settings.endpoints.addr(rpc.service)) as channel:
        call = channel.unary_unary(rpc.method, request_serializer=None, response_deserializer=None)
        for i in range(WARMUP):
            await call(rpc.requests[i % len(rpc.requests)], timeout=30)
        engine = 0.0
        cpu, wall = time.process_time(), time.perf_counter()
        for i in range(calls):
            answer = await call(rpc.requests[i % len(rpc.requests)], timeout=30)
            engine += _engine_ms(answer, rpc.method)
        return time.process_time() - cpu, time.perf_counter() - wall, engine


async def serve_bytes(port: int, call: Callable[[bytes, object], Awaitable[bytes]], ready) -> None:
    """A bare grpc.aio server answering ECHO_METHOD with `call(request, context)`, bytes in and out (nothing
    parsed), until terminated; `ready` is set once it listens."""
    server = grpc.aio.server()
    handler = grpc.unary_unary_rpc_method_handler(call, request_deserializer=None, response_serializer=None)
    server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler("hops.Echo", {"Call": handler})])
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    ready.set()
    await server.wait_for_termination()


def _echo_serve(port: int, answer_bytes: int, wait_s: float, ready) -> None:
    answer = b"\x0a" * answer_bytes  # bytes, never parsed

    async def echo(request: bytes, context) -> bytes:
        if wait_s:
            await asyncio.sleep(wait_s)
        return answer
    asyncio.run(serve_bytes(port, echo, ready))


def echo_cost(request_bytes: int, answer_bytes: int, calls: int, wait_s: float = 0.0) -> tuple[float, float]:
    """(caller, server) CPU ms per call of a bare echo: a request of `request_bytes`, an answer of `answer_bytes`,
    answered at once or after `wait_s`."""
    async def run(port: int) -> float:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            call = channel.unary_unary(ECHO_METHOD, request_serializer=None, response_deserializer=None)
            body = b"\x0a" * request_bytes
            for _ in range(WARMUP):
                await call(body)
            started = time.process_time()
            for _ in range(calls):
                await call(body)
            return time.process_time() - started

    caller, served = against_server(_echo_serve, (answer_bytes, wait_s), run)
    return caller / calls * 1e3, served / (calls + WARMUP) * 1e3


def measure(settings: Settings, recorded: list[Recorded], calls: int) -> list[HopRow]:
    """Each recorded RPC replayed against its service and echoed at its sizes."""
    pids = stack_processes(ports={name: int(settings.endpoints.addr(name).rsplit(':', 1)[1]) for name in STUBS})
    rows = []
    for rpc in recorded:
        if rpc.service not in pids:
            raise RuntimeError(f"no running {rpc.service} service found: start the stack (`hybridsearch serve all`)")
        serving = psutil.Process(pids[rpc.service])
        before = serving.cpu_times()
        caller, _, engine = asyncio.run(_replay(settings, rpc, calls))
        after = serving.cpu_times()
        served = (after.user + after.system) - (before.user + before.system)
        request_bytes = int(statistics.median(len(r) for r in rpc.requests))
        answer_bytes = int(statistics.median(len(a) for a in rpc.answers))
        echo_caller, echo_server = echo_cost(request_bytes, answer_bytes, calls)
        engine_ms = fusion_engine_ms(rpc.requests, calls) if rpc.name == "fusion.Fuse" else engine / calls
        waiting = sum(echo_cost(request_bytes, answer_bytes, calls, engine_ms / 1e3)) if engine_ms else 0.0
        rows.append(HopRow(rpc.name, rpc.per_answer, request_bytes, answer_bytes, calls,
                           round(caller / calls * 1e3, 3), round(served / (calls + WARMUP) * 1e3, 3),
                           round(engine_ms, 3), round(echo_caller, 3), round(echo_server, 3), round(waiting, 3)))
    return rows


def hop_table(settings: Settings, queries: list[str], collection: str, modes: list[str], calls: int) -> list[HopRow]:
    recorded = asyncio.run(capture(settings, queries, collection, modes))
    return measure(settings, recorded, calls)


def markdown(rows: list[HopRow], modes: list[str]) -> str:
    header = ["RPC", *(f"per {m} answer" for m in modes), "request B", "answer B", "caller CPU ms", "server CPU ms",
              "engine ms", "echo CPU ms", "(hop - engine) / echo", "echo lasting the engine's time, CPU ms",
              "(hop - engine) / that echo"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for r in rows:
        cells = [r.rpc, *(f"{r.per_answer.get(m, 0):.2f}" for m in modes), str(r.request_bytes), str(r.answer_bytes),
                 f"{r.caller_cpu_ms:.3f}", f"{r.server_cpu_ms:.3f}", f"{r.engine_ms:.3f}", f"{r.echo_cpu_ms:.3f}",
                 f"{r.tax:.1f}x", f"{r.waiting_echo_cpu_ms:.3f}" if r.waiting_echo_cpu_ms else "-",
                 f"{r.waiting_tax:.1f}x"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)

