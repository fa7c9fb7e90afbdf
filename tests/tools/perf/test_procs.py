"""Process discovery and per-request CPU arithmetic of perf.procs."""

from __future__ import annotations

import os

from hybridsearch.tools.perf.procs import Usage, _service_of, cpu_ms_per_request, usage


def test_names_the_stack_processes_from_their_command_lines():
    assert _service_of(["/x/.venv/bin/python3.11", "-m", "hybridsearch.cli", "serve", "bm25"]) == "bm25"
    assert _service_of(["/x/.venv/bin/hybridsearch", "serve", "all"]) is None  # the launcher itself
    assert _service_of(["/usr/bin/redis-server 127.0.0.1:6379"]) == "redis"
    assert _service_of(["/p/tritonserver/bin/tritonserver", "--model-repository=/r"]) == "triton"
    assert _service_of(["/usr/bin/python3", "serve", "gateway"]) is None  # not ours


def test_cpu_per_request_and_own_usage():
    before = {"gateway": Usage(1.0, 10), "bm25": Usage(2.0, 10)}
    after = {"gateway": Usage(1.5, 10), "bm25": Usage(2.1, 10)}
    assert cpu_ms_per_request(before, after, 100) == {"gateway": 5.0, "bm25": 1.0}
    assert cpu_ms_per_request(before, after, 0) == {}
    mine = usage(os.getpid())
    assert mine is not None and mine.cpu_s > 0 and mine.rss_bytes > 10 * 2**20
    assert usage(2**22 + 7) is None  # no such process
