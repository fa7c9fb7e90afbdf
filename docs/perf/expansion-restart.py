"""kill -9 the expansion service of a test stack N times, M seconds apart: seconds until it is healthy and
answers an Expand again, and supervisord's part (its log: exited -> spawned). docs/faults.md, "Restart times".

    .venv/bin/python docs/perf/expansion-restart.py [KILLS] [SECONDS_APART]
"""

import re
import signal
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import grpc

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
from stacks import running_stack, stack_env_on  # noqa: E402

from hybridsearch.launcher import grpc_healthy  # noqa: E402
from hybridsearch.v1 import common_pb2, expansion_pb2, expansion_pb2_grpc  # noqa: E402

KILLS = int(sys.argv[1]) if len(sys.argv) > 1 else 5
APART_S = float(sys.argv[2]) if len(sys.argv) > 2 else 5.0
STAMP = re.compile(r"^(\S+ \S+) \S+ (exited|spawned): '?expansion")


def answers(addr: str) -> bool:
    try:
        with grpc.insecure_channel(addr) as channel:
            expansion_pb2_grpc.ExpansionServiceStub(channel).Expand(expansion_pb2.ExpandRequest(
                query="wie werden ranked lists zusammengeführt", collection="default",
                effort=common_pb2.EFFORT_BALANCED), timeout=1.0)
        return True
    except grpc.RpcError:
        return False


def supervisord_gaps(log: Path) -> list[float]:
    """Seconds from each exit of expansion to its next spawn, from supervisord's log."""
    events = [(m[2], datetime.strptime(m[1], "%Y-%m-%d %H:%M:%S,%f")) for line in log.read_text().splitlines()
              if (m := STAMP.match(line))]
    return [(b[1] - a[1]).total_seconds() for a, b in zip(events, events[1:]) if (a[0], b[0]) == ("exited", "spawned")]


with tempfile.TemporaryDirectory() as data:
    env = {**stack_env_on(grpc="2505", redis="2667", triton="2820"), "HYBRIDSEARCH_DATA_DIR": data}
    with running_stack(env) as stack:
        addr = stack.settings.endpoints.addr("expansion")
        for i in range(KILLS):
            time.sleep(APART_S)
            stack.kill("expansion", signal.SIGKILL)
            t0 = time.monotonic()
            while not grpc_healthy(addr):
                time.sleep(0.02)
            healthy = time.monotonic() - t0
            while not answers(addr):
                time.sleep(0.02)
            print(f"kill {i}: healthy after {healthy:.2f} s, answering after {time.monotonic() - t0:.2f} s", flush=True)
        gaps = supervisord_gaps(Path(data) / "logs" / "supervisord.log")
        print("supervisord, exit to spawn: " + ", ".join(f"{g:.2f} s" for g in gaps))
