"""What both store services share (storage/stores.py): hits built once per cached payload."""

from __future__ import annotations


def test_built_hits_copy_the_hit_built_for_a_payload_with_each_lists_score_and_rank():
    from hybridsearch.storage.stores import BuiltHits
    from hybridsearch.storage.stores import leg_hit
    from hybridsearch.vector.dense import VectorEngine
    from hybridsearch.v1 import common_pb2

    built_count = []

    def build(payload, fields, content):
        built_count.append(payload["chunk_id"])
        return leg_hit(payload, 0.0, 0, fields, content)

    payloads = [{"chunk_id": f"d{i}#0", "doc_id": f"d{i}", "title": f"t{i}", "text": f"text {i}", "meta": {"year": str(i)},
                 "span": [i, i + 5, 1, 2]} for i in range(6)]

    class Point:
        def __init__(self, payload, score):
            self.payload, self.score = payload, score

    built = BuiltHits(100, build)
    for scores in ([0.9, 0.8, 0.7, 0.6, 0.5, 0.4], [0.5, 0.45, 0.4, 0.3, 0.2, 0.1]):
        points = [Point(p, s) for p, s in zip(payloads, scores)]
        fresh = VectorEngine._ranked(common_pb2.QUERY_KIND_ORIGINAL, "q", points, ("year",), 3)
        copied = VectorEngine._ranked(common_pb2.QUERY_KIND_ORIGINAL, "q", points, ("year",), 3, built)
        assert copied == fresh  # text to depth 3, scores, ranks, metadata, spans: the same message
    assert len(built_count) == 6  # built once each, the second list copied
    replaced = dict(payloads[0], text="rewritten")  # a write: the cache hands out a new payload object
    again = VectorEngine._ranked(common_pb2.QUERY_KIND_ORIGINAL, "q", [Point(replaced, 1.0)], ("year",), 3, built)
    assert again.hits[0].text == "rewritten" and len(built_count) == 7
    small = BuiltHits(2, build)  # bounded
    VectorEngine._ranked(common_pb2.QUERY_KIND_ORIGINAL, "q", [Point(p, 1.0) for p in payloads], ("year",), 3, small)
    assert len(small._built) <= 2
