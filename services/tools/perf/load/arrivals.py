"""Arrival schedules for the open loop: when each request is due, as offsets from the run's start.

Constant: one every 1/rate seconds. Poisson: exponential gaps of mean 1/rate (independent arrivals,
bursts included, what many independent users produce). Seeded, so a run can be repeated exactly.
Bursts (`bursts`): `size` requests due at the same instant, `count` times, `gap_s` apart (a fan-in of
many clients at once: what admission must queue or shed).
"""

from __future__ import annotations

import random
from collections.abc import Iterator

from hybridsearch.tools.perf.load.bounds import MAX_REQUESTS

ARRIVALS = ("poisson", "constant")


def schedule(rate: float, duration_s: float, kind: str = "poisson", seed: int = 0,
             limit: int = MAX_REQUESTS) -> Iterator[float]:
    """Offsets in seconds, ascending, each < duration_s, at most `limit` of them."""
    if rate <= 0 or duration_s <= 0:
        return
    if kind not in ARRIVALS:
        raise ValueError(f"unknown arrival schedule {kind!r}: choose from {', '.join(ARRIVALS)}")
    rng = random.Random(seed)
    t = 0.0 if kind == "constant" else rng.expovariate(rate)
    for i in range(limit):
        if kind == "constant":
            t = i / rate
        if t >= duration_s:
            return
        yield t
        if kind == "poisson":
            t += rng.expovariate(rate)


def bursts(size: int, count: int = 1, gap_s: float = 1.0) -> Iterator[float]:
    """Offsets of `count` bursts of `size` requests each, all of a burst due at once, `gap_s` apart."""
    for burst in range(count):
        for _ in range(size):
            yield burst * gap_s
