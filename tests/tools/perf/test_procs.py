"""Process discovery and per-request CPU arithmetic of perf.procs."""

from __future__ import annotations

import os
import socket
from pathlib import Path

from hybridsearch.tools.perf.procs import (
    Usage, _holds_socket, _service_of, cpu_ms_per_request, listening_inodes, stack_processes, usage,
)


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


def test_a_listening_socket_is_found_by_its_port():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        inodes = listening_inodes()[port]
        assert _holds_socket(Path("/proc"), os.getpid(), inodes)
        assert not _holds_socket(Path("/proc"), os.getppid(), inodes)


def fake_process(proc: Path, pid: int, argv: list[str], parent: int = 1, socket_inode: str = "") -> None:
    (proc / str(pid) / "fd").mkdir(parents=True)
    (proc / str(pid) / "cmdline").write_bytes(b"\0".join(a.encode() for a in argv) + b"\0")
    (proc / str(pid) / "stat").write_text(f"{pid} (python3) S {parent} 0 0")
    if socket_inode:
        (proc / str(pid) / "fd" / "7").symlink_to(f"socket:[{socket_inode}]")


def test_two_stacks_on_one_machine_are_told_apart_by_their_ports(tmp_path):
    proc = tmp_path
    (proc / "net").mkdir()
    header = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
    (proc / "net" / "tcp").write_text(header +
        "   0: 0100007F:C352 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 5111 1\n"
        "   1: 0100007F:1F41 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 5222 1\n")
    serve = ["/r/.venv/bin/python3.11", "-m", "hybridsearch.cli", "serve", "bm25"]
    fake_process(proc, 100, serve, socket_inode="9999")           # another stack's bm25, started first
    fake_process(proc, 200, serve, socket_inode="5111")           # ours: listens on 0xC352 = 50002
    fake_process(proc, 300, ["/t/tritonserver"], socket_inode="8888")
    fake_process(proc, 400, ["/t/tritonserver"], socket_inode="5222")  # ours: 0x1F41 = 8001
    fake_process(proc, 301, ["/t/triton_python_backend_stub", "x"], parent=300)
    fake_process(proc, 401, ["/t/triton_python_backend_stub", "x"], parent=400)
    assert stack_processes(proc) == {"bm25": 100, "triton": 300, "triton-python": 301}
    assert stack_processes(proc, ports={"bm25": 50002, "triton": 8001}) == \
        {"bm25": 200, "triton": 400, "triton-python": 401}
