"""The vector leg: the original query (with Rocchio feedback where the effort allows), the semantic
variants and HyDE, on the vector service."""

from __future__ import annotations

from dataclasses import dataclass

from hybridsearch.v1 import common_pb2

MODES = frozenset({common_pb2.RETRIEVAL_MODE_VECTOR, common_pb2.RETRIEVAL_MODE_HYBRID})


@dataclass(frozen=True)
class VectorLeg:
    leg: int    # its row of the leg table (query.legs): the registry builds it with the row's value and name
    name: str
    part: str = "vector"
    off: str = "mode"
    kinds: frozenset[int] = frozenset({common_pb2.QUERY_KIND_ORIGINAL, common_pb2.QUERY_KIND_SEMANTIC_VARIANT,
                                       common_pb2.QUERY_KIND_HYDE})

    def used_by(self, plan) -> bool:
        return plan.mode in MODES

    def request(self, base, plan, legs):
        # Rocchio feedback is query-side expansion too: it follows the original query, as the plan says.
        if any(q.kind == common_pb2.QUERY_KIND_ORIGINAL for q in base.queries):
            base.feedback_docs = legs.vector.feedback_docs if plan.rocchio else 0
        base.fuzzy = plan.fuzzy  # typo tolerance: the original query is embedded as the BM25 service corrects it
        return base

    def call(self, backends, request, timeout):
        return backends.vector.Search(request, timeout=timeout)
