"""Expansion apart against expansion inside the gateway, on one stack at once (session 22): the stack served with
topology.in_gateway ["fusion"] (gateway A on 50051, an expansion process), and a second gateway B on 50151 with
["fusion", "expansion"] over the same services; each SciFact query asked of both, in alternating order, the CPU of
A's gateway and expansion processes and of B's gateway read around each answer, and each answer's wall time.
    HYBRIDSEARCH_TOPOLOGY__IN_GATEWAY='["fusion"]' hybridsearch serve all &
    HYBRIDSEARCH_ENDPOINTS__GATEWAY_PORT=50151 HYBRIDSEARCH_METRICS_PORT=0 \
      HYBRIDSEARCH_TOPOLOGY__IN_GATEWAY='["fusion","expansion"]' python -m hybridsearch.cli serve gateway &
    .venv/bin/python docs/perf/session-s38/experiments/two-gateways.py B_PID bm25,fast,balanced SUFFIX"""
import json, sys, time, os, subprocess
from pathlib import Path
from hybridsearch.client import GatewayClient
from hybridsearch.tools.perf.speed import SPEED_MODES
qs=[json.loads(l)["text"] for l in open("../shared/datasets/scifact/queries.jsonl")]
TICK=os.sysconf("SC_CLK_TCK")
def cpu(p):
    f=Path(f"/proc/{p}/stat").read_text().rsplit(")",1)[1].split(); return (int(f[11])+int(f[12]))/TICK
A=int(subprocess.run(["pgrep","-f","hybridsearch.cli serve gateway$"],capture_output=True,text=True).stdout.split()[0])
E=int(subprocess.run(["pgrep","-f","hybridsearch.cli serve expansion$"],capture_output=True,text=True).stdout.split()[0])
B=int(sys.argv[1])
ca, cb = GatewayClient("127.0.0.1:50051"), GatewayClient("127.0.0.1:50151")
for mode in sys.argv[2].split(","):
    for q in qs[:20]:
        ca.search(SPEED_MODES[mode].request(q,"bench-scifact-8c1bc262",10)); cb.search(SPEED_MODES[mode].request(q,"bench-scifact-8c1bc262",10))
    spent={"A":0.0,"B":0.0}; wall={"A":0.0,"B":0.0}
    for i,q in enumerate(qs):
        order=[("A",ca,A),("B",cb,B)] if i%2==0 else [("B",cb,B),("A",ca,A)]
        for name,c,pid in order:
            c0=cpu(pid)+(cpu(E) if name=="A" else 0); t=time.perf_counter()
            c.search(SPEED_MODES[mode].request(q+" "+sys.argv[3],"bench-scifact-8c1bc262",10))
            wall[name]+=time.perf_counter()-t
            time.sleep(0.003)
            spent[name]+=cpu(pid)+(cpu(E) if name=="A" else 0)-c0
    n=len(qs)
    print(mode, "A (expansion apart): gateway + expansion CPU %.2f ms, wall %.2f ms | B (expansion inside): gateway CPU %.2f ms, wall %.2f ms" % (spent["A"]/n*1000, wall["A"]/n*1000, spent["B"]/n*1000, wall["B"]/n*1000))
