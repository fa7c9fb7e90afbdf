"""The vector service's hits: what a LEG_VECTOR list carries below the request's text_depth."""

from __future__ import annotations

import base64
from types import SimpleNamespace

from hybridsearch.common.store_servicer import trim_texts
from hybridsearch.common.stores import SPAN
from hybridsearch.v1 import common_pb2
from hybridsearch.vector.service import VectorEngine


def point(i: int, sealed: bool = False) -> SimpleNamespace:
    payload = {"chunk_id": f"d{i}#0", "doc_id": f"d{i}", "meta": {"year": 2000 + i}, SPAN: [i, i + 9, 1, 2]}
    if sealed:
        payload.update(sealed=base64.b64encode(b"blob").decode(), key_id="k1")
    else:
        payload.update(title=f"title {i}", text=f"text of document {i}")
    return SimpleNamespace(payload=payload, score=1.0 - i / 100)


def test_hits_below_the_text_depth_come_without_content_as_trimming_left_them():
    points = [point(i, sealed=i % 3 == 0) for i in range(8)]
    shallow = VectorEngine._ranked(common_pb2.QUERY_KIND_ORIGINAL, "q", points, ("year",), text_depth=3)
    whole = VectorEngine._ranked(common_pb2.QUERY_KIND_ORIGINAL, "q", points, ("year",))
    assert [bool(h.text or h.HasField("sealed")) for h in shallow.hits] == [True] * 3 + [False] * 5
    assert [h.text for h in whole.hits if not h.HasField("sealed")][-1] == "text of document 7"
    assert all(h.metadata["year"] and h.span.end_char for h in shallow.hits)  # ids, metadata, spans for every hit
    assert shallow == trim_texts([whole], 3)[0]
