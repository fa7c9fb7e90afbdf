"""The tag leg (Gnosis' topic leg): the original query's keywords matched exactly against the documents'
tags, ranked by how many matched, as a third ranked list. Only collections that declare `tag_leg: true`
run it, in hybrid mode.

Served by the vector service's TagSearch: a Qdrant keyword payload index on the split tags, queried
with match-any. The same filter runs on qdrant-edge and on the Qdrant server, it needs no embedding,
and the tags live beside the chunk's other payload, so a document's tags are replaced with it.
It fetches 75% of the legs' depth, as Gnosis' topic leg fetches 75% of its vector pool.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from hybridsearch.v1 import common_pb2

POOL_SHARE = 0.75


@dataclass(frozen=True)
class TagLeg:
    leg: int    # its row of the leg table (query.legs): the registry builds it with the row's value and name
    name: str
    part: str = "vector"
    off: str = "collection without tag_leg, or not hybrid"
    kinds: frozenset[int] = frozenset({common_pb2.QUERY_KIND_ORIGINAL})

    def used_by(self, plan) -> bool:
        return plan.mode == common_pb2.RETRIEVAL_MODE_HYBRID and plan.config.tag_leg

    def request(self, base, plan, legs):
        base.limit = max(1, math.ceil(base.limit * POOL_SHARE))
        if plan.seal is not None:  # a sealed collection's tags are keyed hashes: so are the keywords sent
            for q in base.queries:
                q.text = plan.seal.tag_query(q.text)
        return base

    def call(self, backends, request, timeout):
        return backends.vector.TagSearch(request, timeout=timeout)
