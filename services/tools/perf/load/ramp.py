"""The knee finder: open-loop steps of rising offered load, until the service stops keeping up.

A step passes when its p99 (of OK answers, from the scheduled send time) is within the limit, fewer
than `max_error_rate` of its requests failed (non-OK answers and requests dropped by the client, over
all scheduled) and the client itself kept the schedule. The ramp stops after `patience` failing steps
in a row, or at once when the client cannot generate the offered rate (a higher step would measure
the client, not the service). The knee is the highest offered rate of a passing step.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from hybridsearch.tools.perf.load.bounds import MAX_RATE, MAX_STEPS

DEFAULT_START_QPS = 10.0
DEFAULT_MAX_QPS = 1280.0


def default_steps(start: float = DEFAULT_START_QPS, max_qps: float = DEFAULT_MAX_QPS) -> list[float]:
    """start, 2x start, 4x start, ... up to max_qps."""
    steps = [float(start)]
    while steps[-1] * 2 <= max_qps and len(steps) < MAX_STEPS:
        steps.append(steps[-1] * 2)
    return steps


def parse_steps(text: str) -> list[float]:
    steps = [float(s) for s in text.split(",") if s.strip()]
    if not steps or len(steps) > MAX_STEPS or any(not 0 < s <= MAX_RATE for s in steps):
        raise ValueError(f"steps are 1-{MAX_STEPS} rates in (0, {MAX_RATE:.0f}], got {text!r}")
    return steps


def step_passes(step: dict, p99_limit_ms: float, max_error_rate: float) -> bool:
    p99 = step["latency_ms"]["p99"]
    return (not step["client_limited"] and p99 is not None and p99 <= p99_limit_ms
            and step["error_rate"] < max_error_rate)


def find_knee(steps: list[dict], p99_limit_ms: float, max_error_rate: float) -> float | None:
    """The highest offered QPS among passing steps; None when no step passed."""
    return max((s["offered_qps"] for s in steps if step_passes(s, p99_limit_ms, max_error_rate)), default=None)


def stop_reason(steps: list[dict], p99_limit_ms: float, max_error_rate: float, patience: int) -> str | None:
    """Why the ramp should stop after its last step, or None to go on."""
    last = steps[-1]
    if last["client_limited"]:
        return (f"the client could not generate {last['offered_qps']:g} QPS "
                f"(sent {last['achieved_send_qps']:g}/s, send lag p99 {last['send_lag_ms']['p99']} ms)")
    failing = 0
    for step in reversed(steps):
        if step_passes(step, p99_limit_ms, max_error_rate):
            break
        failing += 1
    if failing >= patience:
        return f"p99 > {p99_limit_ms:g} ms or errors >= {max_error_rate:.1%} for {failing} steps in a row"
    return None


async def run_ramp(run_step: Callable[[float], Awaitable[dict]], steps: list[float], p99_limit_ms: float,
                   max_error_rate: float, patience: int, stop: asyncio.Event) -> dict:
    """Runs `run_step(qps)` (a run summary) for each rate until a stop rule fires: the step table and the knee."""
    done: list[dict] = []
    reason = "every step ran"
    for qps in steps:
        if stop.is_set():
            reason = "interrupted"
            break
        done.append(await run_step(qps))
        if (why := stop_reason(done, p99_limit_ms, max_error_rate, patience)) is not None:
            reason = why
            break
    return {"p99_limit_ms": p99_limit_ms, "max_error_rate": max_error_rate, "patience": patience,
            "knee_qps": find_knee(done, p99_limit_ms, max_error_rate) if done else None,
            "stopped_because": reason, "table": [step_row(s, p99_limit_ms, max_error_rate) for s in done]}


def step_row(step: dict, p99_limit_ms: float, max_error_rate: float) -> dict:
    """One line of the step table."""
    latency = step["latency_ms"]
    return {"offered_qps": step["offered_qps"], "achieved_send_qps": step["achieved_send_qps"],
            "throughput_qps": step["throughput_qps"], "goodput_qps": step["goodput_qps"],
            "p50_ms": latency["p50"], "p99_ms": latency["p99"], "p99.9_ms": latency["p99.9"], "max_ms": latency["max"],
            "error_rate": step["error_rate"], "dropped_by_client": step["dropped_by_client"], "codes": step["codes"],
            "client_limited": step["client_limited"], "passes": step_passes(step, p99_limit_ms, max_error_rate)}
