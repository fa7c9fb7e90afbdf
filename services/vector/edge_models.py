"""qdrant-client's models in qdrant_edge's classes: the collection's settings (edge_config), the search settings
(edge_search_params) and filters (edge_filter), so the embedded engine takes what a Qdrant server takes."""

from __future__ import annotations


import qdrant_edge as qe
from qdrant_client import models

from hybridsearch.config.stores import VectorSettings
from hybridsearch.vector.points import (
    collection_config,
)

# HNSW full_scan_threshold (KB of vectors), Qdrant's default: a segment, or a filter's candidate set,
# smaller than this is scored by scan instead of the graph.
FULL_SCAN_KB = 10_000


def edge_enum(enum, model_value) -> object:
    """The qdrant_edge enum member named like a qdrant-client enum value ("Cosine", "keyword", "int8")."""
    return getattr(enum, str(model_value.value).capitalize())


def edge_config(cfg: VectorSettings, dim: int) -> qe.EdgeConfig:
    """The shard configuration for these settings: what `collection_config` asks of a server, less what
    a single in-process shard has not got (shards, replicas, write consistency)."""
    server = collection_config(cfg, dim)
    vectors: models.VectorParams = server["vectors_config"]
    hnsw: models.HnswConfigDiff = server["hnsw_config"]
    quantization = None
    if (scalar := server["quantization_config"]) is not None:
        quantization = qe.ScalarQuantizationConfig(
            edge_enum(qe.ScalarType, scalar.scalar.type), quantile=scalar.scalar.quantile,
            always_ram=scalar.scalar.always_ram,
        )
    # Segments holding half the backlog's vectors get an HNSW graph when optimize() runs (the build is
    # only started once the backlog is reached, see the module docstring).
    indexing_kb = max(1, cfg.edge_index_backlog * dim * 4 // 1024 // 2)
    return qe.EdgeConfig(
        vectors=qe.EdgeVectorParams(size=vectors.size, distance=edge_enum(qe.Distance, vectors.distance),
                                    on_disk=vectors.on_disk),
        hnsw_config=qe.HnswIndexConfig(m=hnsw.m, ef_construct=hnsw.ef_construct,
                                       full_scan_threshold=FULL_SCAN_KB),
        quantization_config=quantization,
        on_disk_payload=server["on_disk_payload"],
        optimizers=qe.EdgeOptimizersConfig(indexing_threshold=indexing_kb),
    )


def edge_search_params(params: models.SearchParams) -> qe.SearchParams:
    quantization = acorn = None
    if (q := params.quantization) is not None:
        quantization = qe.QuantizationSearchParams(rescore=q.rescore, oversampling=q.oversampling)
    if (a := params.acorn) is not None:
        acorn = qe.AcornSearchParams(enable=bool(a.enable), max_selectivity=a.max_selectivity)
    return qe.SearchParams(hnsw_ef=params.hnsw_ef, exact=bool(params.exact), quantization=quantization,
                           acorn=acorn)


def _edge_condition(condition) -> qe.FieldCondition | qe.Filter:
    if isinstance(condition, models.Filter):
        return edge_filter(condition)
    if isinstance(condition, models.IsEmptyCondition):
        return qe.IsEmptyCondition(key=condition.is_empty.key)
    if isinstance(condition, models.FieldCondition):
        match = condition.match
        if isinstance(match, models.MatchValue):
            return qe.FieldCondition(key=condition.key, match=qe.MatchValue(match.value))
        if isinstance(match, models.MatchAny):
            return qe.FieldCondition(key=condition.key, match=qe.MatchAny(list(match.any)))
        if isinstance(match, models.MatchExcept):
            return qe.FieldCondition(key=condition.key, match=qe.MatchExcept(list(match.except_)))
    raise TypeError(f"no qdrant-edge translation for {condition!r}")


def edge_filter(flt: models.Filter | None) -> qe.Filter | None:
    """The same filter in qdrant_edge's classes (the conditions `qdrant_filter` and stats use)."""
    if flt is None:
        return None

    def clause(conditions) -> list | None:
        if conditions is None:
            return None
        return [_edge_condition(c) for c in (conditions if isinstance(conditions, list) else [conditions])]

    return qe.Filter(must=clause(flt.must), should=clause(flt.should), must_not=clause(flt.must_not))
