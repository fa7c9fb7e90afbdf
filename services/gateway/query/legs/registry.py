"""Every retrieval leg the gateway runs beside the others, keyed by its proto `Leg` value: built from the
leg table (query.legs), whose row names the leg's class here ("module:Class"), so a leg is its module and
that one row. A row without a class is not run here: LEG_GRAPH's link expansion runs after fusion
(gateway.query.graph)."""

from __future__ import annotations

from collections.abc import Iterable
from importlib import import_module
from types import MappingProxyType

from hybridsearch.query import legs
from hybridsearch.gateway.query.legs.protocol import RetrievalLeg


def build(specs: Iterable[legs.LegSpec]) -> MappingProxyType[int, RetrievalLeg]:
    """Each row's gateway class, made with the row's Leg value and name, keyed by the value."""
    out: dict[int, RetrievalLeg] = {}
    for spec in specs:
        if spec.gateway:
            module, _, cls = spec.gateway.partition(":")
            out[spec.value] = getattr(import_module(module), cls)(leg=spec.value, name=spec.name)
    return MappingProxyType(out)


LEGS: MappingProxyType[int, RetrievalLeg] = build(legs.SPECS)
