"""What a load run may target and how big it may get: loopback only, every loop bounded."""

from __future__ import annotations

import ipaddress
import math

MAX_REQUESTS = 1_000_000  # per run (one open- or closed-loop run, one ramp step, one writer)
MAX_RUN_S = 600.0  # per run or ramp step
MAX_TOTAL_S = 3600.0  # scheduled time of a whole command (every scenario, step and phase)
MAX_RATE = 20_000.0  # offered queries (or documents) per second
MAX_WORKERS = 1000  # closed-loop workers
MAX_OUTSTANDING = 2000  # requests in flight at once, open loop
MAX_STEPS = 24  # ramp steps
MAX_CHANNELS = 64


class LoadBoundsError(ValueError):
    """A target that is not loopback, or a run larger than the hard limits."""


def check_loopback(address: str) -> str:
    """`address` (host:port, [v6]:port) when its host is 127.0.0.0/8, ::1 or localhost; raises otherwise."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise LoadBoundsError(f"{address!r} is not host:port")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if host != "localhost":
        try:
            loopback = ipaddress.ip_address(host).is_loopback
        except ValueError:
            loopback = False
        if not loopback:
            raise LoadBoundsError(f"{address!r} is not a loopback address: load runs target 127.x, ::1 or localhost only")
    return address


def outstanding_cap(rate: float, requested: int | None = None) -> int:
    """Requests allowed in flight at once: `requested`, else 10x the rate (ten seconds of arrivals) and
    at least 10; never above MAX_OUTSTANDING."""
    cap = requested if requested else max(10, math.ceil(10 * rate))
    return max(1, min(cap, MAX_OUTSTANDING))


def check_run(duration_s: float, rate: float | None = None, workers: int | None = None) -> None:
    """Raises when one run would exceed the hard limits."""
    if not 0 < duration_s <= MAX_RUN_S:
        raise LoadBoundsError(f"a run lasts 0-{MAX_RUN_S:.0f} s, got {duration_s}")
    if rate is not None and not 0 < rate <= MAX_RATE:
        raise LoadBoundsError(f"the offered rate is 0-{MAX_RATE:.0f}/s, got {rate}")
    if workers is not None and not 1 <= workers <= MAX_WORKERS:
        raise LoadBoundsError(f"closed loop takes 1-{MAX_WORKERS} workers, got {workers}")
