"""The leg table: every ranked-list source, one row each, read by every part that names legs.

A row says what the rest of the system needs to know about a leg: its display name (the key of its
fusion weights in settings and in `FusionConfig`, its LegStatus, span and metrics label), its proto
`Leg` value (what its ranked lists and the answer's evidence carry), its default weights under the
score-based methods and under RRF, whether its original list counts towards RRF's top-rank bonus, and
the gateway class that runs it beside the other legs. Adding a leg is its module and one row here:
fusion weighs it (fusion.methods), settings and the Fuse RPC take its weights by name, the gateway's
registry runs it (gateway.query.legs.registry), metrics count its failures (runtime.metrics), calibration
weighs its evidence (gateway.query.calibration), with no other edit.

proto3 enums are open: a new leg may use a `Leg` number the enum does not name yet. A value that no
row names (a newer gateway's leg, a direct Fuse caller's) is `leg_<n>` and weighs DEFAULT_WEIGHT under
the score-based methods, DEFAULT_RRF_WEIGHT under RRF, unless the config names `leg_<n>`.

Neutral: fusion must not import the gateway, so the gateway class is named by its import path, which
only gateway.query.legs.registry imports.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from hybridsearch.v1 import common_pb2

# The two maps of per-leg weights, by their shared name in FusionParams, FusionSettings and FusionConfig.
WEIGHTS = "leg_weights"          # linear (min-max), z-score, DBSF
RRF_WEIGHTS = "rrf_leg_weights"  # RRF: multiplies each list's kind weight
MAPS = (WEIGHTS, RRF_WEIGHTS)

# A leg no row names: one more leg beside the others (the registered legs' own defaults are 0.5 and 1).
DEFAULT_WEIGHT = 0.5
DEFAULT_RRF_WEIGHT = 1.0
NAME = re.compile(r"[a-z][a-z0-9_]{0,31}")  # a leg name: a settings key, a metrics label, a map key


@dataclass(frozen=True)
class LegSpec:
    name: str            # display name: weight key, LegStatus / span / stage name, metrics label
    value: int           # its common_pb2.Leg value (on its ranked lists and the answer's evidence)
    weight: float        # default weight under the score-based methods (linear, z-score, DBSF)
    rrf_weight: float    # default weight under RRF
    bonus: bool = False  # its original list counts towards RRF's top-rank bonus (a hit in the head of every such leg)
    # The gateway's RetrievalLeg that runs it beside the other legs ("module:Class", built with leg=value,
    # name=name by gateway.query.legs.registry); "" when the gateway runs it some other way (graph: after fusion).
    gateway: str = ""


# The service defaults, chosen in docs/quality.md (`hybridsearch tune`): z-score fusion with equal leg
# weights had the best worst-case margin over the competing designs; plain RRF (GNO's, CodeRAG's) weighs
# every leg 1. The tag leg's list is one more leg beside the other two. The link expansion's list
# (`graph`) weighs half a leg of the z-score fusion, under every method: linked evidence lifts a candidate
# the query found, and a neighbour found by its links only ranks below the seed that led to it (at 0.5, a
# neighbour list as long as the BM25 list put its top neighbour above the seed: tests/gateway/query/test_graph.py).
SPECS: tuple[LegSpec, ...] = (
    LegSpec("bm25", common_pb2.LEG_BM25, 0.5, 1.0, bonus=True, gateway="hybridsearch.gateway.query.legs.bm25:Bm25Leg"),
    LegSpec("vector", common_pb2.LEG_VECTOR, 0.5, 1.0, bonus=True, gateway="hybridsearch.gateway.query.legs.vector:VectorLeg"),
    LegSpec("tag", common_pb2.LEG_TAG, 0.5, 1.0, gateway="hybridsearch.gateway.query.legs.tag:TagLeg"),
    LegSpec("graph", common_pb2.LEG_GRAPH, 0.25, 0.25),
)

# FusionConfig's and FusionSettings' named weights from before the keyed maps, frozen: still read, each
# onto its leg's entry of the maps named (a keyed entry set beside one wins), and still written for old
# readers. A new leg has only its keys.
LEGACY: dict[str, tuple[str, tuple[str, ...]]] = {
    "bm25_weight": ("bm25", (WEIGHTS,)),
    "vector_weight": ("vector", (WEIGHTS,)),
    "tag_weight": ("tag", (WEIGHTS,)),
    "rrf_bm25_weight": ("bm25", (RRF_WEIGHTS,)),
    "rrf_vector_weight": ("vector", (RRF_WEIGHTS,)),
    "rrf_tag_weight": ("tag", (RRF_WEIGHTS,)),
    "graph_weight": ("graph", (WEIGHTS, RRF_WEIGHTS)),  # every method; written as the applied method's
}


# Lookups read SPECS when called (a handful of rows), so a test can add a row.

def names() -> tuple[str, ...]:
    return tuple(s.name for s in SPECS)


def spec_named(name: str) -> LegSpec | None:
    return next((s for s in SPECS if s.name == name), None)


def name_of(value: int) -> str:
    """A Leg value's name: its row's, else `leg_<n>` (a leg this table does not know)."""
    return next((s.name for s in SPECS if s.value == value), f"leg_{value}")


def default_weight(name: str, rrf: bool) -> float:
    """A leg's default weight under RRF or under the score-based methods; DEFAULT_* for a name no row has."""
    spec = spec_named(name)
    if spec is None:
        return DEFAULT_RRF_WEIGHT if rrf else DEFAULT_WEIGHT
    return spec.rrf_weight if rrf else spec.weight


def defaults(attr: str) -> dict[str, float]:
    """Every row's default weight for one of the MAPS."""
    return {s.name: default_weight(s.name, attr == RRF_WEIGHTS) for s in SPECS}


def default_weights() -> dict[str, float]:
    return defaults(WEIGHTS)


def default_rrf_weights() -> dict[str, float]:
    return defaults(RRF_WEIGHTS)


def bonus_values() -> frozenset[int]:
    """The Leg values whose original lists earn RRF's top-rank bonus together."""
    return frozenset(s.value for s in SPECS if s.bonus)


def legacy_entries(given: dict) -> dict[str, dict]:
    """The old named weights among `given` (field name -> value), as entries of the MAPS they set."""
    out: dict[str, dict] = {attr: {} for attr in MAPS}
    for field_name, (leg, attrs) in LEGACY.items():
        if given.get(field_name) is not None:
            for attr in attrs:
                out[attr][leg] = given[field_name]
    return out
