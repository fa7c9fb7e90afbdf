"""What one run measured: HDR histograms, answers by status code, degraded answers, per-second series.

Latency is measured from the time a request was *scheduled* to be sent, not from when it was sent:
a request that had to wait (for a client that fell behind, or in a closed loop for the previous
answer) would otherwise not count the wait, the coordinated-omission error. The time from the actual
send (service time) and the send lag (sent - scheduled) are recorded beside it. A closed loop has no
schedule: there scheduled = sent, and the two histograms are the same.
"""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from dataclasses import dataclass, field

import numpy as np
from hdrh.histogram import HdrHistogram

LOWEST_US, HIGHEST_US, SIGNIFICANT_DIGITS = 1, 60_000_000, 3  # 1 us .. 60 s, 3 significant digits
PERCENTILES = {"p50": 50.0, "p90": 90.0, "p99": 99.0, "p99.9": 99.9}
OK = "OK"
CANCELLED = "CANCELLED"  # abandoned by the client when a run ends (never by the server's choice)
TOOK_STAGE = "gateway total (took_ms)"
# The client could not keep its schedule: sends this late at p99, or fewer sends than due.
CLIENT_LAG_LIMIT_MS = 25.0
CLIENT_SEND_SHARE = 0.95


@dataclass(frozen=True)
class Outcome:
    """One answer: its gRPC status code name, and for a search what the answer said about itself."""

    code: str = OK
    degraded: bool = False
    failed_legs: tuple[str, ...] = ()
    stages_ms: tuple[tuple[str, float], ...] = ()


def new_histogram() -> HdrHistogram:
    return HdrHistogram(LOWEST_US, HIGHEST_US, SIGNIFICANT_DIGITS)


def _micros(seconds: float) -> int:
    return min(HIGHEST_US, max(LOWEST_US, round(seconds * 1e6)))


def histogram_ms(histogram: HdrHistogram) -> dict[str, float | None]:
    """p50/p90/p99/p99.9/max/mean in milliseconds (None for an empty histogram)."""
    if histogram.get_total_count() == 0:
        return {**{name: None for name in PERCENTILES}, "max": None, "mean": None}
    row: dict[str, float | None] = {name: round(histogram.get_value_at_percentile(q) / 1000, 3)
                                    for name, q in PERCENTILES.items()}
    row["max"] = round(histogram.get_max_value() / 1000, 3)
    row["mean"] = round(histogram.get_mean_value() / 1000, 3)
    return row


@dataclass
class Second:
    """One second of a run: arrivals by their scheduled time, answers by their completion time."""

    offered: int = 0
    sent: int = 0
    dropped: int = 0
    completed: int = 0
    errors: int = 0
    latencies_ms: list[float] = field(default_factory=list)

    def row(self, t: int) -> dict:
        pct = (np.percentile(self.latencies_ms, [50, 99]).round(3).tolist() if self.latencies_ms else [None, None])
        return {"t": t, "offered": self.offered, "sent": self.sent, "dropped": self.dropped,
                "completed": self.completed, "errors": self.errors, "p50_ms": pct[0], "p99_ms": pct[1]}


class Recorder:
    """Everything one run measured. Times are event-loop seconds; `origin` is the run's start."""

    def __init__(self, name: str, origin: float, deadline_s: float, command_origin: float | None = None) -> None:
        self.name = name
        self.origin = origin
        self.deadline_s = deadline_s
        self.start_offset_s = origin - (origin if command_origin is None else command_origin)
        self.latency = new_histogram()
        self.service = new_histogram()
        self.send_lag = new_histogram()
        self.codes: Counter[str] = Counter()
        self.failed_legs: Counter[str] = Counter()
        self.stages: dict[str, list[float]] = defaultdict(list)
        self.seconds: dict[int, Second] = defaultdict(Second)
        self.scheduled = self.sent = self.dropped = self.completed = 0
        self.degraded = self.good = 0
        self.last_sent = origin

    def _second(self, t: float) -> Second:
        return self.seconds[max(0, int(t - self.origin))]

    def on_scheduled(self, scheduled: float) -> None:
        self.scheduled += 1
        self._second(scheduled).offered += 1

    def on_dropped(self, scheduled: float) -> None:
        """Due, but not sent: too many requests were already outstanding."""
        self.dropped += 1
        self._second(scheduled).dropped += 1

    def on_sent(self, scheduled: float, sent: float) -> None:
        self.sent += 1
        self.last_sent = max(self.last_sent, sent)
        self._second(sent).sent += 1
        self.send_lag.record_value(_micros(max(0.0, sent - scheduled)))

    def on_completed(self, scheduled: float, sent: float, done: float, outcome: Outcome) -> None:
        latency_s = done - scheduled
        self.completed += 1
        self.codes[outcome.code] += 1
        second = self._second(done)
        second.completed += 1
        if outcome.code != OK:
            second.errors += 1
            return
        self.latency.record_value(_micros(latency_s))
        self.service.record_value(_micros(done - sent))
        second.latencies_ms.append(latency_s * 1000)
        self.good += latency_s <= self.deadline_s
        self.degraded += outcome.degraded
        self.failed_legs.update(outcome.failed_legs)
        for stage, ms in outcome.stages_ms:
            self.stages[stage].append(ms)

    def summary(self, window_s: float, ended: float, offered_qps: float | None = None) -> dict:
        """All figures of the run. `window_s`: the scheduled span (duration); `ended`: when the last
        answer came back (throughput counts the drain after the window too)."""
        elapsed = max(ended - self.origin, 1e-9)
        send_span = max(window_s, self.last_sent - self.origin, 1e-9)
        errors = self.completed - self.codes[OK]
        lag = histogram_ms(self.send_lag)
        achieved = self.sent / send_span
        due = (self.scheduled - self.dropped) / max(window_s, 1e-9)
        client_limited = bool(self.sent) and ((lag["p99"] or 0.0) > CLIENT_LAG_LIMIT_MS
                                              or achieved < CLIENT_SEND_SHARE * due)
        return {
            "name": self.name,
            "start_offset_s": round(self.start_offset_s, 3),
            "window_s": round(window_s, 3),
            "elapsed_s": round(elapsed, 3),
            "offered_qps": offered_qps,
            "scheduled": self.scheduled,
            "sent": self.sent,
            "dropped_by_client": self.dropped,
            "completed": self.completed,
            "ok": self.codes[OK],
            "errors": errors,
            "codes": dict(sorted(self.codes.items())),
            "error_rate": round((errors + self.dropped) / self.scheduled, 5) if self.scheduled else 0.0,
            "degraded": self.degraded,
            "failed_legs": dict(sorted(self.failed_legs.items())),
            "achieved_send_qps": round(achieved, 3),
            "client_limited": client_limited,
            "throughput_qps": round(self.completed / elapsed, 3),
            "goodput_qps": round(self.good / elapsed, 3),
            "deadline_ms": round(self.deadline_s * 1000, 3),
            "latency_ms": histogram_ms(self.latency),
            "service_time_ms": histogram_ms(self.service),
            "send_lag_ms": lag,
            "stages_median_ms": {stage: round(statistics.median(v), 3) for stage, v in self.stages.items()},
            "timeseries": [self.seconds[t].row(t) for t in sorted(self.seconds)],
            "latency_hdr": self.latency.encode().decode("ascii") if self.latency.get_total_count() else "",
        }
