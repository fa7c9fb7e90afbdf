"""Gateway B of stores-in-gateway.py (both stores in its process) asked alone: 150 SciFact queries of each mode back
to back, then 3 ms apart, its CPU per answer and the p50 of the answers' wall times (how much of the alternated
figures is a process woken cold). Printed output of the run in session 23: one-gateway-warm.txt.
    .venv/bin/python docs/perf/session-s39/experiments/one-gateway-warm.py B_PID"""
import json, statistics, sys, time
from hybridsearch.client import GatewayClient
from hybridsearch.tools.perf.procs import cpu_ns
from hybridsearch.tools.perf.speed import SPEED_MODES
qs = [json.loads(line)["text"] for line in open("../shared/datasets/scifact/queries.jsonl")]


def cpu(pid):
    return cpu_ns(pid) / 1e9


B = int(sys.argv[1]); c = GatewayClient("127.0.0.1:50151")
for mode in ("bm25", "fast", "balanced"):
    for sleep in (0, 0.003):
        b = cpu(B); walls = []
        for q in qs[:150]:
            t = time.perf_counter(); c.search(SPEED_MODES[mode].request(q + " w%s" % sleep, "bench-scifact-8c1bc262", 10))
            walls.append((time.perf_counter() - t) * 1000)
            if sleep:
                time.sleep(sleep)
        print(mode, "sleep", sleep, "CPU %.2f ms p50 %.2f" % ((cpu(B) - b) / 150 * 1000, statistics.median(walls)))
