"""How soon a written document is found: one document at a time through the gateway, each with a word
no other document holds, then searched until both legs return it.

- ack: the Upsert's round trip (both stores have written it: docs/performance.md section 4);
- visible: from sending the Upsert to the first answer that holds the document, per leg: a BM25-only
  search for its unique word, and a vector-only search for its own text (an identical text has the
  identical vector: it is the nearest one once the store holds it);
- the written documents are deleted afterwards.
"""

from __future__ import annotations

import time
import uuid

import numpy as np

from hybridsearch.client import GatewayClient
from hybridsearch.client.requests import document

LEGS = ("bm25", "vector")


def _found(client: GatewayClient, collection: str, leg: str, query: str, doc_id: str) -> bool:
    response = client.search(query, collection=collection, mode=leg, effort="fast", top_k=10, rerank=False)
    return any(hit.doc_id == doc_id for hit in response.hits)


def measure(client: GatewayClient, collection: str, writes: int = 20, poll_s: float = 0.005,
            give_up_s: float = 30.0) -> dict:
    """`writes` documents, one Upsert each: ack and per-leg visibility in ms (p50, max), and how many
    were visible on the first search after the ack."""
    ack, visible, at_once = [], {leg: [] for leg in LEGS}, {leg: 0 for leg in LEGS}
    run = uuid.uuid4().hex[:8]
    ids = []
    try:
        for i in range(writes):
            doc_id, word = f"visibility-{run}-{i}", f"zqv{run}x{i}"
            text = f"{word} a document written while the collection serves searches, number {i} of run {run}"
            ids.append(doc_id)
            sent = time.perf_counter()
            client.upsert(collection, [document(doc_id, text)])
            ack.append((time.perf_counter() - sent) * 1000)
            for leg, query in (("bm25", word), ("vector", text)):
                first = True
                while not _found(client, collection, leg, query, doc_id):
                    first = False
                    if time.perf_counter() - sent > give_up_s:
                        raise RuntimeError(f"{doc_id} not found by the {leg} leg {give_up_s} s after its Upsert")
                    time.sleep(poll_s)
                visible[leg].append((time.perf_counter() - sent) * 1000)
                at_once[leg] += first
    finally:
        if ids:
            client.delete(collection, ids)

    def stats(values: list[float]) -> dict:
        return {"p50_ms": round(float(np.median(values)), 1), "max_ms": round(float(np.max(values)), 1)}

    return {"collection": collection, "writes": writes, "ack": stats(ack),
            **{f"visible_{leg}": {**stats(visible[leg]), "on_first_search": at_once[leg]} for leg in LEGS}}
