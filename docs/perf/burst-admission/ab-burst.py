"""The burst A/B of docs/performance.md §3.1: a test stack (tests/stacks.py) running the code on this
process's PYTHONPATH, the sample corpus indexed into `burst`, then `hybridsearch loadtest burst` (the
branch's client, CLIENT) once per deadline given, with the gateway's rejections by reason from /metrics.

    PYTHONPATH=<checkout>/.shim HYBRIDSEARCH_TEST_PORT_SHIFT=50 .venv/bin/python docs/perf/burst-admission/ab-burst.py \
        <label> 1000 250

Loopback only; each run is 5 bursts of 40 FAST searches, 2 s apart (about 20 s with the warm-up)."""

import json
import os
import re
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "tests"))
os.environ.setdefault("HYBRIDSEARCH_TEST_PORT_SHIFT", "50")
from stacks import STACK_ENV, gateway_client, running_stack  # noqa: E402

CLIENT = os.environ.get("CLIENT_PYTHONPATH", str(REPO / ".shim"))


def rejected(port: int) -> dict[str, float]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    return {m[0]: float(m[1]) for m in re.findall(r'hybridsearch_rejected_total\{reason="(\w+)"\} (\S+)', text)}


label, deadlines = sys.argv[1], sys.argv[2:]
env_of_stack = {**STACK_ENV, "HYBRIDSEARCH_METRICS_PORT": "29514",
                "HYBRIDSEARCH_DATA_DIR": tempfile.mkdtemp(prefix=f"burst-{label}-")}
with running_stack(env_of_stack) as stack:
    from hybridsearch.cli import SAMPLE_CORPUS
    from hybridsearch.runtime.metrics import metrics_port
    from hybridsearch.corpus import read_folder

    with gateway_client(stack) as client:
        client.index("burst", list(read_folder(SAMPLE_CORPUS)))
    port = metrics_port(stack.settings, "gateway")
    for deadline_ms in deadlines:
        out = Path(tempfile.gettempdir()) / f"burst-{label}-{deadline_ms}"
        before = rejected(port)
        subprocess.run([sys.executable, "-m", "hybridsearch.cli", "loadtest", "burst", "--address",
                        stack.settings.endpoints.addr("gateway"), "--collection", "burst", "--burst-size", "40",
                        "--bursts", "5", "--burst-gap", "2", "--deadline-ms", deadline_ms, "--warmup", "10",
                        "--out", str(out)], env={**stack.test_env, "PYTHONPATH": CLIENT}, check=True,
                       capture_output=True, timeout=120)
        after = rejected(port)
        run = json.loads((out / "loadtest.json").read_text())["runs"][0]
        print(label, deadline_ms, run["codes"], "rejected:", {k: v - before.get(k, 0) for k, v in after.items()
                                                            if v - before.get(k, 0)})
