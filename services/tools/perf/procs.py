"""The stack's processes as /proc sees them: which pid serves what, CPU seconds and resident memory.

Used to turn a load run into per-request CPU cost per service (the sizing table of
docs/performance.md) and to sample memory over a run. Linux only; a process that exits mid-run simply
stops being counted.

CPU time comes from the process's CPU clock (clock_gettime on CLOCK_PROCESS_CPUTIME of another pid:
nanoseconds, every thread, the exited ones too), so one sequential query can be measured on its own;
/proc/PID/stat's user + system ticks (10 ms each) are the fallback where that clock cannot be read.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from hybridsearch.runtime import services

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")
SERVICES = services.NAMES  # `hybridsearch serve <name>` children (runtime.services)


def stack_processes(proc: Path = Path("/proc"), ports: dict[str, int] | None = None) -> dict[str, int]:
    """name -> pid of every running service (`hybridsearch serve <name>` children), Triton, Redis and the LLM.

    With several stacks on the machine (a test stack, a second checkout) a name has several processes:
    `ports` (name -> the port that stack's part listens on) then picks the one listening there, and leaves
    out a lone process that does not (another stack's: this one runs no such part); Triton's Python stub is
    the one whose parent is the chosen Triton."""
    found: dict[str, list[int]] = {}
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        args = [a.decode(errors="replace") for a in argv if a]
        if name := _service_of(args):
            found.setdefault(name, []).append(int(entry.name))
    if ports and "redis-cache" in ports and "redis" in found:  # the cache Redis: the redis-server on its port
        found["redis-cache"] = list(found["redis"])
    chosen = {name: min(pids) for name, pids in found.items()}
    if ports:
        listeners = listening_inodes(proc)
        for name, pids in found.items():
            if name not in ports:
                continue
            inodes = listeners.get(ports[name], set())
            holding = [pid for pid in sorted(pids) if _holds_socket(proc, pid, inodes)]
            if holding:
                chosen[name] = holding[0]
            elif len(pids) == 1 and _fds_readable(proc, pids[0]):
                del chosen[name]  # another stack's: it does not listen where this stack's would
        if "triton-python" in chosen:
            stubs = [pid for pid in found["triton-python"] if _parent(proc, pid) == chosen.get("triton")]
            if stubs:
                chosen["triton-python"] = stubs[0]
            else:
                del chosen["triton-python"]
    return chosen


def listening_inodes(proc: Path = Path("/proc")) -> dict[int, set[str]]:
    """port -> the socket inodes listening on it (TCP over IPv4 and IPv6)."""
    out: dict[int, set[str]] = {}
    for table in ("tcp", "tcp6"):
        try:
            rows = (proc / "net" / table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            cols = row.split()
            if len(cols) > 9 and cols[3] == "0A":  # LISTEN
                out.setdefault(int(cols[1].rsplit(":", 1)[1], 16), set()).add(cols[9])
    return out


def _holds_socket(proc: Path, pid: int, inodes: set[str]) -> bool:
    try:
        return any(os.readlink(fd).removeprefix("socket:[").removesuffix("]") in inodes
                   for fd in (proc / str(pid) / "fd").iterdir())
    except OSError:
        return False


def _fds_readable(proc: Path, pid: int) -> bool:
    """Whether this process may look at `pid`'s open files (not another user's, unless root)."""
    try:
        next(iter((proc / str(pid) / "fd").iterdir()), None)
    except OSError:
        return False
    return True


def _parent(proc: Path, pid: int) -> int:
    try:
        stat = (proc / str(pid) / "stat").read_text()
    except OSError:
        return 0
    return int(stat[stat.rindex(")") + 2:].split()[1])


def _service_of(args: list[str]) -> str | None:
    if "serve" in args:
        i = args.index("serve")
        if i + 1 < len(args) and args[i + 1] in SERVICES and any("hybridsearch" in a for a in args[:i]):
            return args[i + 1]
    if args and args[0].endswith("tritonserver"):
        return "triton"
    if args and "triton_python_backend_stub" in args[0]:
        return "triton-python"
    if args and os.path.basename(args[0].split()[0]) == "redis-server":  # redis rewrites its title
        return "redis"
    if "llama_cpp.server" in args:  # the launcher's llama.cpp server (THOROUGH's expansion LLM)
        return "llm"
    return None


@dataclass(frozen=True)
class Usage:
    cpu_s: float
    rss_bytes: int


def _process_clock(pid: int) -> int:
    """The clock id of a process's CPU clock (the kernel's MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED))."""
    return (~pid << 3) | 2


def cpu_ns(pid: int, proc: Path = Path("/proc")) -> int | None:
    """CPU nanoseconds the process has used (user + system, all its threads); None when it is gone.

    The process CPU clock where it can be read (nanoseconds), else /proc/PID/stat's ticks."""
    if proc == Path("/proc"):
        try:
            return time.clock_gettime_ns(_process_clock(pid))
        except (OSError, OverflowError):
            pass
    try:
        stat = (proc / str(pid) / "stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()  # the command name may contain spaces
    return (int(fields[11]) + int(fields[12])) * 1_000_000_000 // CLOCK_TICKS


def cpu_ns_of(pids: dict[str, int]) -> dict[str, int]:
    """name -> CPU nanoseconds of each process still running."""
    return {name: ns for name, pid in pids.items() if (ns := cpu_ns(pid)) is not None}


def usage(pid: int, proc: Path = Path("/proc")) -> Usage | None:
    """CPU seconds (user + system, all threads) and resident bytes; None when the process is gone."""
    try:
        statm = (proc / str(pid) / "statm").read_text().split()
    except OSError:
        return None
    if (ns := cpu_ns(pid, proc)) is None:
        return None
    return Usage(ns / 1e9, int(statm[1]) * PAGE_BYTES)


def snapshot(pids: dict[str, int]) -> dict[str, Usage]:
    return {name: u for name, pid in pids.items() if (u := usage(pid)) is not None}


def cpu_ms_per_request(before: dict[str, Usage], after: dict[str, Usage], requests: int) -> dict[str, float]:
    """CPU milliseconds each process spent per request between two snapshots."""
    if requests <= 0:
        return {}
    return {name: round((after[name].cpu_s - before[name].cpu_s) * 1000 / requests, 3)
            for name in before if name in after}
