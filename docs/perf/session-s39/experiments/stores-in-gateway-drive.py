"""The driver of stores-in-gateway.py: every SciFact query in each mode, asked of gateway A (the stack's: the stores
over their hops) and gateway B (both stores in its own process), in alternating order, each fresh to both (a
suffix per round); CPU of A's gateway, BM25 and vector processes against B's gateway, and each answer's wall time.
    .venv/bin/python docs/perf/session-s39/experiments/stores-in-gateway-drive.py B_PID ROUND [N]"""
import json, statistics, sys, time
from hybridsearch.client import GatewayClient
from hybridsearch.tools.perf.procs import cpu_ns, stack_processes
from hybridsearch.tools.perf.speed import SPEED_MODES
qs = [json.loads(line)["text"] for line in open("../shared/datasets/scifact/queries.jsonl")]
COLLECTION = "bench-scifact-8c1bc262"


def cpu(pid):
    return cpu_ns(pid) / 1e9


running = stack_processes()
A = tuple(running[s] for s in ("gateway", "bm25", "vector"))
B = (int(sys.argv[1]),)
n = int(sys.argv[3]) if len(sys.argv) > 3 else len(qs)
clients = {"A": (GatewayClient("127.0.0.1:50051"), A), "B": (GatewayClient("127.0.0.1:50151"), B)}
modes = ("bm25", "fast", "balanced")
for q in qs[:10]:
    for mode in modes:
        for client, _ in clients.values():
            client.search(SPEED_MODES[mode].request(q + " warm", COLLECTION, 10))
spent = {(m, s): 0.0 for m in modes for s in clients}
walls = {(m, s): [] for m in modes for s in clients}
for i, q in enumerate(qs[:n]):
    for mode in modes:
        for name in (("A", "B") if i % 2 == 0 else ("B", "A")):
            client, pids = clients[name]
            before = sum(cpu(p) for p in pids)
            started = time.perf_counter()
            client.search(SPEED_MODES[mode].request(q + " " + sys.argv[2], COLLECTION, 10))
            walls[mode, name].append((time.perf_counter() - started) * 1000)
            time.sleep(0.003)
            spent[mode, name] += sum(cpu(p) for p in pids) - before
for mode in modes:
    print(f"{mode:9s}" + " | ".join(
        f"{name} ({'stores apart' if name == 'A' else 'stores inside'}): CPU {spent[mode, name] / n * 1000:.2f} ms, "
        f"wall p50 {statistics.median(walls[mode, name]):.2f} mean {statistics.mean(walls[mode, name]):.2f} ms"
        for name in clients))
