"""CPU per answer, the headline cost figure: how many milliseconds of CPU each stack process spends on one
answered query, their sum, and that sum against the in-process library baseline's CPU per query.

Latency hides cost: a leg that waits on another core looks free in p50 but takes a core from every other
query under load. `hybridsearch speed` (sequential, interleaved with the baseline) and `hybridsearch
loadtest` (closed loop, ramp) both report the figures here; docs/performance.md ("How CPU per answer is
measured") says how each is taken.
"""

from __future__ import annotations

import json
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from hybridsearch.runtime import services

if TYPE_CHECKING:
    from hybridsearch.config.settings import Settings

# Columns in this order wherever processes are listed; any other name (a `--pids` process) follows.
PROCESS_ORDER = (*services.NAMES, "redis", "redis-cache", "triton", "triton-python", "llm")  # the service table, then the rest

CpuProbe = Callable[[], dict[str, int]]  # name -> CPU nanoseconds so far, of every process measured
# Query texts the vector leg embeds per answer where the mode alone decides (speed modes, load scenarios);
# expanding modes embed their semantic variants too, as many as expansion makes. With the stack's query
# vector cache on (vector/query_cache.py) a text it has seen is not embedded again, so these are counts
# of a fresh query only.
QUERY_EMBEDS: dict[str, float] = {"bm25": 0, "vector": 1, "fast": 1}
QUERY_CACHE_OFF_ENV = "HYBRIDSEARCH_VECTOR__QUERY_CACHE_SIZE=0 HYBRIDSEARCH_VECTOR__QUERY_CACHE_REDIS=false"


def query_cache_on(settings: Settings) -> bool:
    """Whether the stack these settings describe keeps query vectors (either level of the cache)."""
    return settings.vector.query_cache_size > 0 or bool(settings.vector.query_cache_redis_at(settings.redis.cache_at))


def embedded_estimate(texts: float | None, query_cache: bool) -> float | None:
    """Texts the model embeds per answer as far as they can be known: none needs no cache to be off; any
    other count is a fresh query's, unknown when the query cache may have had the vectors."""
    if texts == 0:
        return 0
    return None if query_cache else texts


def settled(probe: CpuProbe, window_s: float = 0.002, busy_share: float = 0.05, limit_s: float = 0.1,
            sleep: Callable[[float], None] = time.sleep) -> dict[str, int]:
    """A reading taken once the processes have gone quiet: together under `busy_share` of one core between two
    readings `window_s` apart (an answer's trailing work, such as paging's kept order written after the
    answer was sent, is done), or the last reading after `limit_s`. The idle background stays under it."""
    last = probe()
    for _ in range(max(1, round(limit_s / window_s))):
        sleep(window_s)
        now = probe()
        if sum(ns - last.get(name, ns) for name, ns in now.items()) <= busy_share * window_s * 1e9:
            return now
        last = now
    return last


def ordered(names: Iterable[str]) -> list[str]:
    """Process names in PROCESS_ORDER, unknown ones after them in their first order."""
    names = list(dict.fromkeys(names))
    rank = {name: i for i, name in enumerate(PROCESS_ORDER)}
    return sorted(names, key=lambda n: (rank.get(n, len(rank)), names.index(n)))


class CpuLedger:
    """CPU nanoseconds charged to columns (a speed mode, a load run), per process, and the answers they bought.

    `charge` takes two readings of the same processes; contiguous readings (each one the next interval's
    start) leave no CPU of the measured processes uncounted: trailing work of one answer lands in the next
    interval's column, never nowhere."""

    def __init__(self) -> None:
        self.ns: dict[str, Counter[str]] = defaultdict(Counter)
        self.answers: Counter[str] = Counter()

    def charge(self, column: str, before: Mapping[str, int], after: Mapping[str, int],
               answers: int = 1) -> Mapping[str, int]:
        """Adds after - before of each process present in both to `column`; returns `after` (the next start)."""
        for name, start in before.items():
            if name in after:
                self.ns[column][name] += max(0, after[name] - start)
        self.answers[column] += answers
        return after

    def per_answer_ms(self, column: str) -> dict[str, float]:
        """Milliseconds of CPU per answer of each process in `column` ({} before any answer)."""
        answers = self.answers[column]
        if answers <= 0:
            return {}
        spent = self.ns[column]
        return {name: round(spent[name] / 1e6 / answers, 3) for name in ordered(spent)}


@dataclass(frozen=True)
class CpuFigure:
    """One path's CPU per answer: per process, the sum, and the sum against the baseline's.

    `embed_ms` is the query embedding's share of the sum where known (estimated: see speed.py), so the
    rest ("outside the query embedding") can be set against the baseline's rest."""

    per_process_ms: Mapping[str, float]
    baseline_ms: float | None = None
    embed_ms: float | None = None
    baseline_embed_ms: float | None = None

    @property
    def total_ms(self) -> float:
        return round(sum(self.per_process_ms.values()), 3)

    @property
    def ratio(self) -> float | None:
        return _ratio(self.total_ms, self.baseline_ms)

    @property
    def outside_embedding_ms(self) -> float | None:
        return None if self.embed_ms is None else round(self.total_ms - self.embed_ms, 3)

    @property
    def baseline_outside_embedding_ms(self) -> float | None:
        if self.baseline_ms is None or self.baseline_embed_ms is None:
            return None
        return round(self.baseline_ms - self.baseline_embed_ms, 3)

    @property
    def outside_embedding_ratio(self) -> float | None:
        if (outside := self.outside_embedding_ms) is None:
            return None
        return _ratio(outside, self.baseline_outside_embedding_ms)

    def as_dict(self) -> dict:
        return {"per_process_ms": dict(self.per_process_ms), "total_ms": self.total_ms,
                "baseline_ms": self.baseline_ms, "ratio": self.ratio, "embed_ms": self.embed_ms,
                "outside_embedding_ms": self.outside_embedding_ms,
                "baseline_outside_embedding_ms": self.baseline_outside_embedding_ms,
                "outside_embedding_ratio": self.outside_embedding_ratio}

    def line(self, label: str) -> str:
        """The headline: `label: CPU per answer 22.3 ms (gateway 3.9 + ...) = 2.23x the baseline's 10.0 ms`."""
        parts = " + ".join(f"{name} {ms:.2f}" for name, ms in self.per_process_ms.items())
        text = f"{label}: CPU per answer {self.total_ms:.2f} ms ({parts or 'no process measured'})"
        if self.ratio is not None:
            text += f" = {self.ratio:.2f}x the in-process baseline's {self.baseline_ms:.2f} ms"
        if self.outside_embedding_ms is not None:
            text += f"; outside the query embedding {self.outside_embedding_ms:.2f} ms"
            if self.outside_embedding_ratio is not None:
                text += (f" = {self.outside_embedding_ratio:.2f}x the baseline's "
                         f"{self.baseline_outside_embedding_ms:.2f} ms")
        return text


def _ratio(value: float, base: float | None) -> float | None:
    return None if base is None or base <= 0 else round(value / base, 3)


def pooled_ms(runs: Iterable[Mapping]) -> dict[str, float]:
    """CPU ms per answer over several runs together (a ramp's steps): each run's `cpu_ms_per_answer` weighted
    by its OK answers, i.e. all their CPU over all their answers."""
    spent: Counter[str] = Counter()
    answers = 0
    for run in runs:
        if (cpu := run.get("cpu_ms_per_answer")) and run["ok"] > 0:
            for name, ms in cpu.items():
                spent[name] += ms * run["ok"]
            answers += run["ok"]
    return {name: round(spent[name] / answers, 3) for name in ordered(spent)} if answers else {}


@dataclass(frozen=True)
class BaselineCpu:
    """The in-process baseline's CPU ms per query (its thread's), and its query embedding's part where known:
    given as a number, or read from a `hybridsearch speed --json-out` file (measured interleaved there)."""

    thread_ms: float
    embed_ms: float | None = None
    source: str = "given"

    @classmethod
    def from_speed_json(cls, path: Path) -> BaselineCpu:
        try:
            base = json.loads(path.read_text())["cpu"]["baseline"]
        except (KeyError, TypeError, json.JSONDecodeError) as err:
            raise ValueError(f"{path}: no cpu.baseline (a `hybridsearch speed --json-out` file of this version)") from err
        return cls(base["thread_ms"], base.get("embed_ms"), str(path))

    def figure(self, per_process_ms: Mapping[str, float], embedded_texts: float | None) -> CpuFigure:
        """`per_process_ms` against this baseline; outside the query embedding too where both counts are known."""
        embed = None if embedded_texts is None or self.embed_ms is None else round(embedded_texts * self.embed_ms, 3)
        return CpuFigure(per_process_ms, self.thread_ms, embed, self.embed_ms)
