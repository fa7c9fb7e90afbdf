"""Sequential answers of one mode through the running stack (session 22 experiments): N SciFact queries (suffixed past the
300), the wall time and the CPU per answer of the gateway, bm25, vector and expansion processes.
    .venv/bin/python docs/perf/session-s38/experiments/drive.py MODE N"""
import json, sys, time, os
from pathlib import Path
sys.path.insert(0, "/work/main/docs/perf")
from hybridsearch.cli.base import gateway_client
from hybridsearch.tools.perf.speed import SPEED_MODES
mode, n = sys.argv[1], int(sys.argv[2])
qs=[json.loads(l)["text"] for l in open("../shared/datasets/scifact/queries.jsonl")]
c=gateway_client()
TICK=os.sysconf("SC_CLK_TCK")
import subprocess
def pid(s): return int(subprocess.run(["pgrep","-f",f"hybridsearch.cli serve {s}$"],capture_output=True,text=True).stdout.split()[0])
def cpu(p):
    f=Path(f"/proc/{p}/stat").read_text().rsplit(")",1)[1].split(); return (int(f[11])+int(f[12]))/TICK
import contextlib
pids={}
for s in ("gateway","bm25","vector","expansion"):
    with contextlib.suppress(Exception): pids[s]=pid(s)
for q in qs[:20]: c.search(SPEED_MODES[mode].request(q,"bench-scifact-8c1bc262",10))
b={s:cpu(p) for s,p in pids.items()}; t=time.perf_counter()
for i in range(n): c.search(SPEED_MODES[mode].request(qs[i%len(qs)]+(" x" if i>=len(qs) else ""),"bench-scifact-8c1bc262",10))
w=(time.perf_counter()-t)/n*1000
print(mode, f"wall {w:.2f} ms", {s:round((cpu(p)-b[s])/n*1000,2) for s,p in pids.items()})
