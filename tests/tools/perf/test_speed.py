"""`hybridsearch speed --collections`: every mode on each collection, a column each, the collections' order
flipped from one query to the next (docs/perf/sealed-cost.sh: a plain and a sealed copy of one corpus)."""

from __future__ import annotations

from test_cpu import FakeGateway, small_baseline

from hybridsearch.tools.perf.speed import default_embeds, query_order, run_speed, speed_columns


class RecordingGateway(FakeGateway):
    def __init__(self) -> None:
        super().__init__()
        self.asked: list[tuple[str, int]] = []

    def search(self, request):
        self.asked.append((request.collection, request.effort))
        return super().search(request)


def test_one_collection_keeps_the_mode_columns():
    assert speed_columns(["fast", "balanced"], []) == speed_columns(["fast", "balanced"], ["c"]) == ["fast", "balanced"]
    assert query_order(["fast", "balanced"], 1) == ["fast", "balanced"]


def test_each_mode_runs_on_each_collection_in_alternating_order():
    columns = speed_columns(["fast", "balanced"], ["plain", "sealed"])
    assert columns == ["fast@plain", "fast@sealed", "balanced@plain", "balanced@sealed"]
    assert query_order(columns, 0) == columns
    assert query_order(columns, 1) == ["fast@sealed", "fast@plain", "balanced@sealed", "balanced@plain"]
    assert default_embeds(columns) == {"fast@plain": 1, "fast@sealed": 1, "balanced@plain": None,
                                       "balanced@sealed": None}
    gateway = RecordingGateway()
    queries = {"q1": "rank fusion", "q2": "bm25 terms"}
    result = run_speed(gateway, small_baseline(1.0), queries, {"q1": {"d0": 1}, "q2": {"d0": 1}}, "plain", columns,
                       warmup=0, cpu=gateway.read)
    assert set(result["columns"]) == {"baseline", *columns}
    assert [c for c, _ in gateway.asked] == ["plain", "sealed", "plain", "sealed",   # the first query
                                             "sealed", "plain", "sealed", "plain"]   # the second: flipped
    assert set(result["cpu"]["per_answer_ms"]) == set(columns)
