"""Link expansion's effect and cost (docs/quality.md, "Link expansion"): a fresh stack (ports shifted by
HYBRIDSEARCH_TEST_PORT_SHIFT), the stack test's linked corpus (tests/gateway/query/test_graph.py), the same query
50 times (after 10 warm-up) per mode with `graph` off and on: the top hits, median `took_ms`, and the
explain timings of the graph stage; then `hybridsearch query --explain` without and with `--graph`.

    HYBRIDSEARCH_TEST_PORT_SHIFT=10 PYTHONPATH=.pp .venv/bin/python docs/quality-data/graph-cost.py
"""
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, "tests"); sys.path.insert(0, "tests/gateway")
from stacks import STACK_ENV, running_stack, gateway_client, client_environment
from test_graph import FILES, POSTMORTEM, QUERY
from hybridsearch.corpus import read_documents
from hybridsearch.v1 import common_pb2, search_pb2

data = tempfile.mkdtemp()
folder = tempfile.mkdtemp()
for name, text in FILES.items():
    os.makedirs(os.path.dirname(os.path.join(folder, name)) or folder, exist_ok=True)
    open(os.path.join(folder, name), "w").write(text)
with running_stack({**STACK_ENV, "HYBRIDSEARCH_DATA_DIR": data}) as stack, gateway_client(stack) as gw:
    docs, _ = read_documents(Path(folder))
    gw.index("notes", [*docs, POSTMORTEM])
    for mode_name, mode in (("bm25", common_pb2.RETRIEVAL_MODE_BM25), ("hybrid", common_pb2.RETRIEVAL_MODE_HYBRID)):
        for graph in (False, True):
            took, stage, leg = [], [], []
            for i in range(60):
                r = gw.search(search_pb2.SearchRequest(query=QUERY, collection="notes", mode=mode, graph=graph,
                                                       effort=common_pb2.EFFORT_FAST, explain=True))
                if i < 10:
                    continue
                took.append(r.took_ms)
                t = {x.stage: x.ms for x in r.explain.timings}
                stage.append(t.get("graph", 0)); leg.append(t.get("leg.graph", 0))
            reason = next(s.reason for s in r.legs if s.name == "graph")
            print(f"{mode_name} graph={graph}: hits {[h.doc_id for h in r.hits]}; graph: {reason}")
            print(f"   took median {statistics.median(took):.1f} ms; graph stage median {statistics.median(stage):.1f} ms "
                  f"(Neighbours call {statistics.median(leg):.1f} ms); parts "
                  f"{ {k: round(v,1) for k, v in t.items() if k.startswith('leg.graph.')} }")
    with client_environment(stack):
        env = dict(os.environ)
    for args in (["--mode", "bm25"], ["--mode", "bm25", "--graph"]):
        out = subprocess.run([".venv/bin/hybridsearch", "query", QUERY, "-c", "notes", "--effort", "fast", "--explain", *args],
                             env=env, capture_output=True, text=True)
        print("$ hybridsearch query", repr(QUERY), "-c notes --effort fast --explain", " ".join(args))
        print(out.stdout, out.stderr[-2000:])
