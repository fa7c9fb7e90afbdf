"""Resident memory of the stack's processes once a second during a command, for the memory-over-time plot.

The processes are the pids given (`--pids`), or every `hybridsearch serve <name>` child, Triton, Redis
and the llama.cpp server found in /proc (perf.procs). A process that exits stops being sampled.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from hybridsearch.tools.perf.load.bounds import MAX_TOTAL_S
from hybridsearch.tools.perf.procs import SERVICES, stack_processes, usage

MB = 2**20


def name_pids(pids: list[int], proc: Path = Path("/proc")) -> dict[str, int]:
    """Given pids named after the stack service they run when they run one, else `pid N`."""
    known = {pid: name for name, pid in stack_processes(proc).items()}
    return {known.get(pid, f"pid {pid}"): pid for pid in pids}


def discover() -> dict[str, int]:
    """The processes of the stack these settings name (ports pick it when several stacks run)."""
    from urllib.parse import urlsplit

    from hybridsearch.config.settings import get_settings

    settings = get_settings()
    # Endpoints.addr: an explicit address's port where one is set, the default port otherwise.
    ports = {name: int(settings.endpoints.addr(name).rsplit(":", 1)[1]) for name in SERVICES}
    ports["triton"] = int(settings.rerank.triton_url.rsplit(":", 1)[1])
    ports["redis"] = urlsplit(settings.redis.state_url).port or 6379
    if settings.redis.cache_url:
        ports["redis-cache"] = urlsplit(settings.redis.cache_url).port or 6379
    ports["llm"] = settings.expansion.llm_port
    found = stack_processes(ports=ports)
    if not settings.expansion.llm_serve:  # this stack serves no LLM: one on its port is another's (or external)
        found.pop("llm", None)
    return found


class RssSampler:
    """Samples `pids` every `period_s` from `origin` (loop time) until stopped; at most MAX_TOTAL_S samples."""

    def __init__(self, pids: dict[str, int], origin: float, period_s: float = 1.0) -> None:
        self.pids = pids
        self.origin = origin
        self.period_s = period_s
        self.series: list[dict] = []

    def sample(self, now: float) -> None:
        rss = {name: round(u.rss_bytes / MB, 1) for name, pid in self.pids.items() if (u := usage(pid)) is not None}
        self.series.append({"t": round(now - self.origin, 3), "rss_mb": rss})

    async def run(self, stop: asyncio.Event) -> None:
        loop = asyncio.get_running_loop()
        for _ in range(int(MAX_TOTAL_S / self.period_s) + 1):
            self.sample(loop.time())
            try:
                await asyncio.wait_for(stop.wait(), self.period_s)
                return
            except TimeoutError:
                continue

    def report(self) -> dict:
        return {"pids": self.pids, "period_s": self.period_s, "series": self.series}
