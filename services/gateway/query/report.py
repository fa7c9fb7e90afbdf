"""What one search reports about itself: leg states, stage timings, notices and the facts explain shows.

The stages of the query path (gateway.query.search) each take what they need and return what they made; this is
the one thing they all write to (as data: no stage calls into it), and nothing in it is read back to decide
anything. The ranked lists and
their texts, which the stages do work on, are the search's Pool (gateway.query.pool).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from hybridsearch.runtime import metrics
from hybridsearch.v1 import expansion_pb2, fusion_pb2, search_pb2

OK, SKIPPED, FAILED = search_pb2.LEG_STATE_OK, search_pb2.LEG_STATE_SKIPPED, search_pb2.LEG_STATE_FAILED
FALLBACK = search_pb2.LEG_STATE_FALLBACK
DEGRADING = frozenset({FAILED, FALLBACK})
LegStatus, StageTiming = search_pb2.LegStatus, search_pb2.StageTiming  # what the stages write into a Report


@dataclass
class Report:
    """A record the stages write into as plain data (a leg's state: `report.legs[name] = LegStatus(...)`; a
    notice: `report.notices.append(...)`); what follows from it (degraded, the failed legs) is read off it."""

    started: float = field(default_factory=time.perf_counter)
    legs: dict[str, search_pb2.LegStatus] = field(default_factory=dict)
    timings: list[search_pb2.StageTiming] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)
    fused_in_gateway: bool = False  # the fusion service failed: the gateway fused (degraded, said in a notice)
    # For explain: what expansion generated, what fusion applied, the metadata boosts, the reranker.
    expansion: expansion_pb2.ExpandResponse | None = None
    fusion_applied: fusion_pb2.FusionConfig | None = None
    boosts: list[search_pb2.AppliedBoost] = field(default_factory=list)
    reranker_model: str = ""

    @property
    def degraded(self) -> bool:
        """Whether the answer is degraded: a leg failed or fell back, or the gateway fused for the fusion service."""
        return self.fused_in_gateway or bool(self.failed_legs())

    def note(self, stage: str, ms: float) -> None:
        """A timing for explain only (the legs' own latency metrics are LEG_DURATION)."""
        self.timings.append(search_pb2.StageTiming(stage=stage, ms=ms))

    def timed(self, stage: str, since: float) -> None:
        seconds = time.perf_counter() - since
        self.timings.append(search_pb2.StageTiming(stage=stage, ms=seconds * 1000))
        metrics.STAGE_DURATION.labels(stage=stage).observe(seconds)

    def failed_legs(self) -> list[search_pb2.LegStatus]:
        return [s for s in self.legs.values() if s.state in DEGRADING]

    def adopt(self, collection: str, part: Report) -> None:
        """One collection's report into the search's (gateway.query.fanout): leg names and timings suffixed
        "@collection", notices prefixed with it."""
        for name, status in part.legs.items():
            named = f"{name}@{collection}"
            self.legs[named] = search_pb2.LegStatus(name=named, state=status.state, reason=status.reason)
        self.fused_in_gateway |= part.fused_in_gateway
        self.timings += [search_pb2.StageTiming(stage=f"{t.stage}@{collection}", ms=t.ms) for t in part.timings]
        self.notices += [f"{collection}: {n}" for n in part.notices]
        self.boosts += part.boosts
        self.expansion = self.expansion or part.expansion
        self.fusion_applied = self.fusion_applied or part.fusion_applied
