"""A store's per-collection gates: every call on a collection (a search, a write, a count, a listing) passes
its gate together with the others; a drop passes it alone, once the calls already inside have left, and the
calls that arrive meanwhile wait for the drop to end (writer-preferring: a stream of searches cannot starve
a drop).

Why. An engine's collection is files on disk (tantivy segments, a qdrant-edge shard) and a drop closes them
and removes the folder. A write or a search that opened the collection while the folder was being removed
read half-deleted files (tantivy: "Failed to open file for write", an index writer panic, a write that never
answered), or made the folder anew half-way through its removal. Behind the gate a write that follows a drop
simply creates the collection anew, whole.

The gates live in one process: they order the calls one store service receives, and a gateway's own writes
and drops (gateway/ingest/write_order.py, which orders those of several gateways through Redis).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from aiorwlock import RWLock


class CollectionGates:
    """One reader-writer lock per collection name, made on first use and kept (a few hundred bytes each)."""

    def __init__(self) -> None:
        self._locks: dict[str, RWLock] = {}

    def _lock(self, collection: str) -> RWLock:
        if (lock := self._locks.get(collection)) is None:
            lock = self._locks[collection] = RWLock()
        return lock

    @asynccontextmanager
    async def using(self, collection: str) -> AsyncIterator[None]:
        """A call on the collection: any number at once, none while it is being dropped."""
        async with self._lock(collection).reader_lock:
            yield

    @asynccontextmanager
    async def dropping(self, collection: str) -> AsyncIterator[None]:
        """The drop of the collection: alone, after the calls inside have left."""
        async with self._lock(collection).writer_lock:
            yield
