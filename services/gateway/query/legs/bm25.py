"""The BM25 leg: the original query and the lexical variants, on the BM25 service. A hashed-terms collection's
queries (sealed_terms: hashed) are sent as their analyzed terms' keyed hashes (security/hashed_terms.py)."""

from __future__ import annotations

from dataclasses import dataclass

from hybridsearch.security.hashed_terms import hashes_terms
from hybridsearch.v1 import common_pb2

MODES = frozenset({common_pb2.RETRIEVAL_MODE_BM25, common_pb2.RETRIEVAL_MODE_HYBRID})


@dataclass(frozen=True)
class Bm25Leg:
    leg: int    # its row of the leg table (query.legs): the registry builds it with the row's value and name
    name: str
    part: str = "bm25"
    off: str = "mode"
    kinds: frozenset[int] = frozenset({common_pb2.QUERY_KIND_ORIGINAL, common_pb2.QUERY_KIND_LEXICAL_VARIANT})

    def used_by(self, plan) -> bool:
        return plan.mode in MODES

    def request(self, base, plan, legs):
        base.fuzzy = plan.fuzzy  # typo tolerance: fuzzy and prefix terms (bm25/fuzzy.py)
        if hashes_terms(plan.seal):
            terms = legs.hashed_terms
            for q in base.queries:
                q.text = terms.query(plan.seal, q.text)
        return base

    def call(self, backends, request, timeout):
        return backends.bm25.Search(request, timeout=timeout)
