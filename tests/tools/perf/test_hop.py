"""The hop floor (tools/perf/hop.py): a real grpc.aio server process and client, CPU on both sides."""

from __future__ import annotations

from hybridsearch.tools.perf.hop import as_dict, leg_answer, measure


def test_answers_grow_with_their_hits():
    assert leg_answer(0).ByteSize() < leg_answer(10).ByteSize() < leg_answer(100).ByteSize()
    assert len(leg_answer(100).lists[0].hits) == 100


def test_a_hop_costs_cpu_on_both_sides():
    cost = measure(10, 200)
    assert cost.calls == 200 and cost.answer_bytes == leg_answer(10).ByteSize()
    assert 0 < cost.client_cpu_ms < 50 and 0 < cost.server_cpu_ms < 50 and cost.wall_ms > 0
    assert as_dict(cost)["cpu_ms"] == round(cost.client_cpu_ms + cost.server_cpu_ms, 3)
