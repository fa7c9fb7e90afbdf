"""The driver of bm25-in-gateway.py: every SciFact query, BM25 only, asked of gateway A (the stack's, BM25 over its
hop) and gateway B (BM25 in its own process), in alternating order; CPU of A's gateway and BM25 processes against
B's gateway, and each answer's wall time (means; p50 of the walls too).
    .venv/bin/python docs/perf/session-s38/experiments/bm25-in-gateway-drive.py B_PID ROUND"""
import json, os, statistics, subprocess, sys, time
from pathlib import Path
from hybridsearch.client import GatewayClient
from hybridsearch.tools.perf.speed import SPEED_MODES
qs = [json.loads(line)["text"] for line in open("../shared/datasets/scifact/queries.jsonl")]
TICK = os.sysconf("SC_CLK_TCK")


def cpu(pid):
    f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / TICK


def pid_of(name):
    return int(subprocess.run(["pgrep", "-f", f"hybridsearch.cli serve {name}$"], capture_output=True, text=True).stdout.split()[0])


A, BM, B = pid_of("gateway"), pid_of("bm25"), int(sys.argv[1])
clients = {"A": (GatewayClient("127.0.0.1:50051"), (A, BM)), "B": (GatewayClient("127.0.0.1:50151"), (B,))}
request = SPEED_MODES["bm25"].request
for q in qs[:20]:
    for client, _ in clients.values():
        client.search(request(q, "bench-scifact-8c1bc262", 10))
spent, walls = {"A": 0.0, "B": 0.0}, {"A": [], "B": []}
for i, q in enumerate(qs):
    for name in (("A", "B") if i % 2 == 0 else ("B", "A")):
        client, pids = clients[name]
        before = sum(cpu(p) for p in pids)
        started = time.perf_counter()
        client.search(request(q + " " + sys.argv[2], "bench-scifact-8c1bc262", 10))
        walls[name].append((time.perf_counter() - started) * 1000)
        time.sleep(0.003)
        spent[name] += sum(cpu(p) for p in pids) - before
n = len(qs)
print("BM25 only, A (the hop): gateway + bm25 CPU %.2f ms, wall mean %.2f p50 %.2f ms | B (BM25 in the gateway): gateway CPU %.2f ms, wall mean %.2f p50 %.2f ms"
      % (spent["A"] / n * 1000, statistics.mean(walls["A"]), statistics.median(walls["A"]),
         spent["B"] / n * 1000, statistics.mean(walls["B"]), statistics.median(walls["B"])))
