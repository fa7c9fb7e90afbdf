"""write-visibility against the real stack: each written document is found by both legs, and nothing
it wrote stays behind."""

from __future__ import annotations

import pytest

from hybridsearch.client.requests import document
from hybridsearch.tools.perf.visibility import LEGS, measure

pytestmark = pytest.mark.stack
COLLECTION = "visibility"


def test_each_write_is_found_by_both_legs_and_deleted_afterwards(gateway):
    gateway.upsert(COLLECTION, [document(f"d{i}", f"note {i} about lanterns and ranked lists") for i in range(20)])
    result = measure(gateway, COLLECTION, writes=3)
    assert result["writes"] == 3 and result["ack"]["p50_ms"] > 0
    for leg in LEGS:
        seen = result[f"visible_{leg}"]
        # Both stores make a write searchable before acknowledging it: the first search after the ack finds it.
        assert seen["on_first_search"] == 3 and seen["max_ms"] >= seen["p50_ms"] > 0
    assert {s.store: s.documents for s in gateway.stats(COLLECTION).stores} == {"bm25": 20, "vector": 20}
