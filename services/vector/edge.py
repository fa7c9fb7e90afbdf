"""The embedded vector store on Qdrant's own engine, in-process (qdrant-edge-py's EdgeShard).

One shard per collection under `<path>/<collection>`; the same points, payload layout, payload indexes,
filters and write semantics as the server path (`store.ChunkPointStore`), and the same collection and
search settings: `collection_config`, `payload_indexes`, `search_params` and `qdrant_filter` build
qdrant-client models, which `edge_config`, `edge_search_params` and `edge_filter` translate.

Each shard's folder also holds its record (storage/stores.py COLLECTION_RECORD), the collection's VectorSpace (its embedder and dimension):
qdrant-edge leaves a file it does not know alone in a shard's folder (it creates, loads, writes and
optimizes around it), so a drop removes the record with the shard and a snapshot (the folder copied,
then renamed into place) carries it. Shards are created and loaded with their own dimension; a shard
without the file (made before collections recorded theirs) has the default embedder's.

Indexing. An edge shard has no background optimizer: writes land in an appendable segment that is
searched by scan, and `EdgeShard.optimize()` (blocking) builds HNSW for segments above the indexing
threshold, merges small segments and vacuums deleted points. This store runs it from a per-collection
maintenance task: once writes to a collection pause for `quiet_s` (or at the latest `max_defer_s` after
the first unflushed write), it flushes the shard, and when `VectorSettings.edge_index_backlog` points
were written since the last build it optimizes. A write therefore does O(batch) work and is searchable as
soon as it returns; a bulk load is indexed once, when it ends. `optimize()` runs it on demand.

Concurrency. qdrant-edge-py 0.9.0 keeps the GIL for the whole of every call (its bindings never
release it), so shard calls run one at a time per process whatever thread makes them: a search waits
for the write batch (`UPSERT_BATCH` points) in progress, and for a whole `optimize()`. The calls still
go through `asyncio.to_thread`, and writes hold the store's lock (optimize too), so only one writer
touches a shard.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import time
from pathlib import Path

import numpy as np
import qdrant_edge as qe
from qdrant_client import models

from hybridsearch.config.stores import VectorSettings
from hybridsearch.storage.stores import CollectionExists, EngineUnavailable, read_record, write_record
from hybridsearch.contract.validation import check_collection
from hybridsearch.vector.kept_payloads import COLD_MISSES, KeptPayloads
from hybridsearch.vector.store import ChunkPointStore
from hybridsearch.v1 import common_pb2
from hybridsearch.vector.points import (
    SCROLL_PAGE,
    UPSERT_BATCH,
    VectorSpace,
    payload_indexes,
    qdrant_filter,
)

from hybridsearch.vector.edge_models import edge_config, edge_enum, edge_filter, edge_search_params

log = logging.getLogger(__name__)

CONFIG_FILE = "edge_config.json"  # what EdgeShard.create writes: its presence means the shard exists


class EdgeStore(ChunkPointStore):
    """Shards under `path`, opened on first use and kept open until `close`, each with its VectorSpace."""

    def __init__(self, *, path: Path, dim: int = 384, settings: VectorSettings | None = None,
                 quiet_s: float = 2.0, max_defer_s: float = 60.0) -> None:
        super().__init__(settings, dim)
        self.name = "qdrant-edge"
        self.root = path
        self.quiet_s, self.max_defer_s = quiet_s, max_defer_s
        self._indexes = {field: edge_enum(qe.PayloadSchemaType, schema)
                         for field, schema in payload_indexes(self.cfg).items()}
        self._shards: dict[str, qe.EdgeShard] = {}
        self._spaces: dict[str, VectorSpace] = {}  # of the open shards
        self._open_lock = asyncio.Lock()
        # (collection, the space to create it with, or None: open only) -> its open in flight
        self._opening: dict[tuple[str, VectorSpace | None], asyncio.Task] = {}
        self._closed = False
        # Per collection: points written since the last optimize, last write time, maintenance task.
        self._backlog: dict[str, int] = {}
        self._last_write: dict[str, float] = {}
        self._maintenance: dict[str, asyncio.Task] = {}
        # Per collection: payloads by point id (VectorSettings.payload_cache), a new dict after every write
        # (_written): a search takes its collection's dict before it queries, so one that meets a write fills a
        # dict let go, never the one later searches read.
        self._kept: dict[str, KeptPayloads] = {}

    def _path(self, collection: str) -> Path:
        return self.root / check_collection(collection)  # the name becomes a directory: validated here too

    def _read_space(self, path: Path) -> VectorSpace:
        """A shard's recorded space; the default one when it has no record."""
        record = read_record(path)
        return VectorSpace(**record) if record is not None else self.default_space

    def _open_sync(self, path: Path) -> tuple[qe.EdgeShard, VectorSpace, int]:
        """Loads (the current settings overwrite the stored ones; segments converge to them on the next
        optimize) or creates a shard with its recorded space's dimension, adds missing payload indexes,
        and says how many points lack HNSW."""
        space = self._read_space(path)
        config = edge_config(self.cfg, space.dim)
        if (path / CONFIG_FILE).exists():
            shard = qe.EdgeShard.load(str(path), config)
        else:
            shard = qe.EdgeShard.create(str(path), config)
        info = shard.info()
        for indexed, schema in self._indexes.items():
            if indexed not in info.payload_schema:  # building an index on a loaded shard is O(points): once
                shard.update(qe.UpdateOperation.create_field_index(indexed, schema))
        return shard, space, max(0, info.points_count - info.indexed_vectors_count)

    async def _shard(self, collection: str, create: VectorSpace | None = None) -> qe.EdgeShard | None:
        """The collection's open shard (None: none on disk and no space to `create` it with). Opening is a
        task of its own, run to its end whoever waits for it: a search cancelled by its deadline leaves the
        open going and the next one finds the shard (a 1M-point shard takes ~8 s to open; were the open
        cancelled with its caller, searches with shorter deadlines would start it again and again and never
        get it)."""
        if (shard := self._shards.get(collection)) is not None:
            return shard
        path, key = self._path(collection), (collection, create)  # a bad name fails here, in its caller
        if (opening := self._opening.get(key)) is None:
            opening = self._opening[key] = asyncio.create_task(self._open(collection, path, create))
            opening.add_done_callback(lambda task: self._opened(key, task))
        return await asyncio.shield(opening)

    def _opened(self, key: tuple[str, VectorSpace | None], task: asyncio.Task) -> None:
        if self._opening.get(key) is task:
            del self._opening[key]
        if not task.cancelled() and (err := task.exception()) is not None and not isinstance(err, EngineUnavailable):
            log.warning("%s: opening %s failed: %r", self.name, key[0], err)  # retrieved: every waiter may be gone

    async def _open(self, collection: str, path: Path, create: VectorSpace | None) -> qe.EdgeShard | None:
        async with self._open_lock:
            if self._closed:
                raise EngineUnavailable(f"{self.name}: the store is closed")
            if (shard := self._shards.get(collection)) is None:
                if not (path / CONFIG_FILE).exists():
                    if create is None:
                        return None
                    # Before the shard: a shard is never without its record (a record left without a shard by
                    # a crash is no collection, and the next create writes its own).
                    await asyncio.to_thread(write_record, path, vars(create))
                started = time.perf_counter()
                shard, space, unindexed = await asyncio.to_thread(self._open_sync, path)
                log.info("%s: opened %s in %.2fs (%s, %d dimensions; %d points without HNSW)", self.name, path,
                         time.perf_counter() - started, space.embedder, space.dim, unindexed)
                self._shards[collection], self._spaces[collection] = shard, space
                if unindexed:  # e.g. a bulk load stopped before its index build: build it when idle
                    self._written(collection, unindexed)
            return shard

    async def create(self, collection: str, space: VectorSpace) -> VectorSpace:
        await self._shard(collection, create=space)
        return self._spaces[collection]

    async def space_of(self, collection: str) -> VectorSpace | None:
        """Opens the shard (reading its record) when it is not open yet."""
        if await self._shard(collection) is None:
            return None
        return self._spaces.get(collection)

    async def exists(self, collection: str) -> bool:
        return collection in self._shards or (self._path(collection) / CONFIG_FILE).exists()

    async def collections(self) -> list[str]:
        on_disk = {p.name for p in self.root.iterdir() if (p / CONFIG_FILE).exists()} if self.root.is_dir() else set()
        return sorted(on_disk | set(self._shards))

    async def drop(self, collection: str) -> bool:
        """Closes the shard (its pending maintenance cancelled) and removes its directory."""
        path = self._path(collection)
        async with self._lock:  # no write, optimize or maintenance of it runs meanwhile
            task = self._maintenance.pop(collection, None)
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
            async with self._open_lock:
                shard = self._shards.pop(collection, None)
                self._spaces.pop(collection, None)
            existed = shard is not None or (path / CONFIG_FILE).exists()
            if shard is not None:
                await asyncio.to_thread(shard.close)
            await asyncio.to_thread(shutil.rmtree, path, True)
            self._backlog.pop(collection, None)
            self._last_write.pop(collection, None)
            self._kept.pop(collection, None)
        return existed

    async def capture(self, collection: str, folder: Path) -> bool:
        """The shard flushed and its folder copied, its record with it (qdrant-edge changes its
        files in place: a link would not keep them), under the writers' lock: no write, optimize or
        maintenance of it runs meanwhile."""
        async with self._lock:
            if (shard := await self._shard(collection)) is None:
                return False
            await asyncio.to_thread(shard.flush)
            await asyncio.to_thread(shutil.copytree, self._path(collection), folder)
        return True

    async def install(self, collection: str, folder: Path) -> None:
        """The restored folder moved into place in one step, its record with it; opened on first use (with the
        recorded space)."""
        path = self._path(collection)
        async with self._lock, self._open_lock:
            if collection in self._shards or path.exists():
                raise CollectionExists(f"{self.name} already holds collection {collection!r}")
            path.parent.mkdir(parents=True, exist_ok=True)
            await asyncio.to_thread(os.rename, folder, path)

    async def _payloads(self, collection: str, ids: list[str], fields: list[str]) -> list[dict]:
        if (shard := await self._shard(collection)) is None:
            return []
        return [r.payload for r in await asyncio.to_thread(shard.retrieve, ids, fields, False)]

    async def _all_payloads(self, collection: str, fields: list[str]) -> list[dict]:
        if (shard := await self._shard(collection)) is None:
            return []
        out, offset = [], None
        while True:
            records, offset = await asyncio.to_thread(shard.scroll, qe.ScrollRequest(
                offset=offset, limit=SCROLL_PAGE, with_payload=fields, with_vector=False))
            out += [r.payload for r in records]
            if offset is None:
                return out

    async def _replace(self, collection: str, ids: list[str], vectors: np.ndarray, payloads: list[dict],
                       stale: list[str]) -> None:
        shard = await self._shard(collection, create=self.default_space)

        def replace() -> None:
            for start in range(0, len(ids), UPSERT_BATCH):
                batch = slice(start, start + UPSERT_BATCH)
                rows = vectors[batch].tolist()  # lists convert faster than numpy rows (measured 23k vs 18k/s)
                points = [qe.Point(i, v, p) for i, v, p in zip(ids[batch], rows, payloads[batch])]
                shard.update(qe.UpdateOperation.upsert_points(points))
            if stale:
                shard.update(qe.UpdateOperation.delete_points(stale))

        await asyncio.to_thread(replace)
        self._written(collection, len(ids) + len(stale))

    async def _delete_points(self, collection: str, ids: list[str]) -> None:
        shard = await self._shard(collection, create=self.default_space)
        await asyncio.to_thread(shard.update, qe.UpdateOperation.delete_points(ids))
        self._written(collection, len(ids))

    async def _set_payloads(self, collection: str, updates: list[tuple[str, dict]]) -> None:
        shard = await self._shard(collection, create=self.default_space)

        def update() -> None:
            for point, payload in updates:
                shard.update(qe.UpdateOperation.set_payload([point], payload))

        await asyncio.to_thread(update)
        self._written(collection, len(updates))

    async def _count(self, collection: str, flt: models.Filter | None) -> int:
        if (shard := await self._shard(collection)) is None:
            return 0
        return await asyncio.to_thread(shard.count, qe.CountRequest(exact=True, filter=edge_filter(flt)))

    async def _matching(self, collection: str, flt: models.Filter, limit: int, fields: list[str]) -> list[dict]:
        if (shard := await self._shard(collection)) is None:
            return []
        records, _ = await asyncio.to_thread(shard.scroll, qe.ScrollRequest(
            limit=limit, filter=edge_filter(flt), with_payload=fields, with_vector=False))
        return [r.payload for r in records]

    async def _details(self, collection: str) -> dict[str, str]:
        if (shard := await self._shard(collection)) is None:
            return {}
        info = await asyncio.to_thread(shard.info)
        return {"segments": str(info.segments_count), "indexed_vectors": str(info.indexed_vectors_count),
                "unindexed_writes": str(self._backlog.get(collection, 0)),
                "payload_indexes": ",".join(sorted(info.payload_schema))}

    async def search(self, collection: str, vectors: np.ndarray, limit: int, filters,
                     with_vectors: bool = False, within: list[str] | None = None,
                     readers: common_pb2.Readers | None = None) -> list[list[qe.ScoredPoint]]:
        """One list of ScoredPoint (`.score`, `.payload`, `.vector`) per query vector, as one batch
        (only documents `within`, and only what `readers` may read, when given)."""
        if (shard := await self._shard(collection)) is None:
            return [[] for _ in vectors]
        flt = edge_filter(qdrant_filter(filters, within, readers))
        params = edge_search_params(await self.params_of(collection))
        cached = bool(self.cfg.payload_cache)
        kept = self._kept.setdefault(collection, KeptPayloads()) if cached else None  # before the query: see _kept
        cold = kept is None or kept.missed > COLD_MISSES  # most hits not kept: the query reads their payloads
        batch = qe.QueryBatchRequest([
            qe.QueryRequest(limit=limit, query=qe.Query.Nearest(v.tolist()), filter=flt,
                            params=params, with_payload=cold, with_vector=with_vectors)
            for v in vectors
        ])
        if kept is None:
            return await asyncio.to_thread(shard.query_batch, batch)
        return await asyncio.to_thread(kept.search, shard, batch, cold, self.cfg.payload_cache, with_vectors)

    def _written(self, collection: str, points: int) -> None:
        """Counts points toward the next index build and makes sure a maintenance task is pending; the
        collection's payload cache starts anew."""
        self._kept.pop(collection, None)
        self._backlog[collection] = self._backlog.get(collection, 0) + points
        self._last_write[collection] = time.monotonic()
        task = self._maintenance.get(collection)
        if task is None or task.done():
            self._maintenance[collection] = asyncio.create_task(self._maintain(collection))

    async def _maintain(self, collection: str) -> None:
        """Once writes pause (or max_defer_s passed): optimize if the backlog is due, else flush."""
        deadline = time.monotonic() + self.max_defer_s
        while (wait := min(self._last_write[collection] + self.quiet_s, deadline) - time.monotonic()) > 0:
            await asyncio.sleep(wait)
        async with self._lock:
            if (shard := self._shards.get(collection)) is None:
                return
            try:
                if self._backlog[collection] >= self.cfg.edge_index_backlog:
                    await self._optimize(collection, shard)
                else:
                    await asyncio.to_thread(shard.flush)
            except Exception:
                log.exception("%s: maintenance of %s failed", self.name, collection)

    async def _optimize(self, collection: str, shard: qe.EdgeShard) -> bool:
        """optimize() then flush(); the caller holds the write lock."""
        started, backlog = time.perf_counter(), self._backlog.get(collection, 0)

        def optimize() -> bool:
            changed = shard.optimize()
            shard.flush()
            return changed

        changed = await asyncio.to_thread(optimize)
        self._backlog[collection] = 0
        log.info("%s: optimized %s (%d points written since the last build) in %.1fs", self.name, collection,
                 backlog, time.perf_counter() - started)
        return changed

    async def optimize(self, collection: str) -> bool:
        """Builds HNSW, merges and vacuums now (every shard call waits meanwhile); True if anything changed."""
        async with self._lock:
            if (shard := await self._shard(collection)) is None:
                return False
            return await self._optimize(collection, shard)

    async def close(self) -> None:
        """Stops pending maintenance and closes (flushes) every shard; the store is unusable afterwards."""
        async with self._lock:  # maintenance in progress holds it: this waits for it to finish
            async with self._open_lock:
                self._closed = True
            tasks = list(self._maintenance.values())
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            shards, self._shards, self._spaces = self._shards, {}, {}
            for shard in shards.values():
                await asyncio.to_thread(shard.close)
