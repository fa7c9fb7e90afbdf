"""Documents for the "queries while writing" scenario, and their removal afterwards.

Every written document gets a fresh id under a per-command prefix (so each upsert is a real write,
never "unchanged"), into the collection the queries run against. Synthetic documents are built from
the queries' own words, so they compete with the real ones for the same terms; `--write-corpus` takes
documents from a BEIR corpus or a folder instead, cycled. Unless asked to keep them, the writer
deletes what it sent when the run ends, so a bench collection is left as it was.
"""

from __future__ import annotations

import itertools
import random
import re
from collections.abc import Iterator
from pathlib import Path

from hybridsearch.runtime.iterables import batched
from hybridsearch.corpus import read_documents
from hybridsearch.tools.perf.load.calls import ChannelPool
from hybridsearch.v1 import ingest_pb2

WORD = re.compile(r"[A-Za-z][A-Za-z'-]+")
FILLER = ("the", "of", "and", "a", "in", "is", "for", "with", "on", "by", "results", "method", "system")
DELETE_BATCH = 1000  # the ingest API's largest request


def synthetic_documents(queries: list[str], prefix: str, seed: int = 0) -> Iterator[ingest_pb2.Document]:
    """Endless documents of 80-240 words drawn from the queries' vocabulary and common filler words."""
    rng = random.Random(seed)
    vocabulary = sorted({w.lower() for q in queries for w in WORD.findall(q)}) or list(FILLER)
    for i in itertools.count():
        words = [rng.choice(vocabulary) if rng.random() < 0.6 else rng.choice(FILLER)
                 for _ in range(rng.randint(80, 240))]
        yield ingest_pb2.Document(id=f"{prefix}-{i}", title=" ".join(words[:6]), text=" ".join(words),
                                  metadata={"source": "loadtest"})


def corpus_documents(path: Path, prefix: str) -> Iterator[ingest_pb2.Document]:
    """The documents under `path` (BEIR corpus or folder), cycled, each under a fresh id."""
    for round_ in itertools.count():
        found = False
        for doc in read_documents(path)[0]:
            found = True
            copy = ingest_pb2.Document()
            copy.CopyFrom(doc)
            copy.id = f"{prefix}-{round_}-{doc.id}"[:256]
            copy.metadata["source"] = "loadtest"
            yield copy
        if not found:
            raise ValueError(f"{path} has no documents")


async def delete_written(pool: ChannelPool, collection: str, ids: list[str], timeout_s: float = 60.0) -> int:
    """Deletes every id the writer sent; returns how many documents the stores removed."""
    deleted = 0
    for chunk in batched(ids, DELETE_BATCH):
        request = ingest_pb2.DeleteRequest(collection=collection, ids=chunk)
        deleted += (await pool.ingest().Delete(request, timeout=timeout_s)).documents_deleted
    return deleted
