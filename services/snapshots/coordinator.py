"""Snapshots and restores of a collection across both stores, run by the gateway's SnapshotService.

**Create.** The collection is held in Redis ("a snapshot": no drop, restore or reconcile meanwhile), and this
gateway's writes of it are held (gateway/ingest/write_order.py, as a drop holds them) while each store takes its
state: tantivy links its committed segments, qdrant-edge flushes and copies its shard (StoreSnapshotsMixin).
Both stores answer "taken"; the writes go on; the stores then write their files to the repository as
content-addressed pieces, and the gateway writes the manifest last. Every write this gateway acknowledged
before the hold is in the snapshot and none after it; searches never wait. A snapshot that fails half-way
leaves no manifest (so no snapshot), only pieces a later one may use or `delete` collects.

**Restore.** The manifest is read and checked (its checksum, its format, that the target would be indexed as
the snapshot was: declared settings, embedder, a sealed collection's keys); the target name is held ("a
restore": writes of it wait, drops are refused) and marked restoring in Redis (`hybridsearch:restoring:<name>`):
while the mark stands, searches, GetDocuments and Stats find no such collection and writes are refused, so
a half-made collection never serves. Each store reads its files into a staging folder, checking every piece
(PREPARE), then moves it into place (COMMIT); then the mark goes. A restore cut short (a process killed, a
store down) keeps its mark: the same restore run again finishes it (files already staged and whole are kept),
or a drop of the name clears it. A corrupted or partial snapshot is refused before anything is moved in.

**Delete.** The manifest goes, then the pieces no other manifest names, unless a snapshot is being taken (its
lease in the repository): those are kept for a later delete. Creates and collections of pieces take the
repository's hold in turn, so a create never writes a manifest naming a piece a delete just removed.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from datetime import datetime, timedelta, timezone

import grpc
from redis.exceptions import RedisError

from hybridsearch.config.collections import collection_config
from hybridsearch.config.settings import Settings
from hybridsearch.storage.holds import Held, Holds
from hybridsearch.security.keys_file import KeysFile, keys_path
from hybridsearch.contract.validation import check_collection, check_written_collection
from hybridsearch.contract.errors import Refusal
from hybridsearch.gateway.backends import Backends
from hybridsearch.gateway.resources.catalog import Catalog
from hybridsearch.gateway.ingest.write_order import RESTORE_HOLDER, WriteOrder, restoring_key
from hybridsearch.snapshots.fit import check_fits
from hybridsearch.runtime.services import Store
from hybridsearch.snapshots.manifest import Manifest, ManifestError, StoredFile, StorePart, parse, snapshot_id
from hybridsearch.snapshots.repository import (
    MANIFESTS,
    Repository,
    RepositoryError,
    manifest_key,
    open_repository,
    piece_key,
    piece_of,
    split_location,
)
from hybridsearch.v1 import snapshots_pb2, stores_pb2

CREATE_HOLDER = "a snapshot"
DELETE_HOLDER = "a snapshot delete"
STORE_TIMEOUT_S = 3600.0  # a store's part of a snapshot or restore: its files read or written whole
LEASES = "leases"
LEASE_TTL = timedelta(hours=6)  # a lease older than this was left by a create that died: it no longer counts
REPOSITORY_WAIT_S = 120.0  # how long a create or delete waits for the other to leave the repository's hold
GC_BATCH = 50


def info(manifest: Manifest, location: str, seconds: float = 0.0) -> snapshots_pb2.SnapshotInfo:
    bm25 = manifest.part(Store.BM25)
    return snapshots_pb2.SnapshotInfo(
        location=location, id=manifest.id, collection=manifest.collection,
        created_at=manifest.created_at.isoformat(timespec="seconds"), documents=bm25.documents, chunks=bm25.chunks,
        bytes_total=manifest.bytes_total, bytes_new=manifest.bytes_new, write_pause_ms=manifest.write_pause_ms,
        seconds=seconds, embedder=manifest.embedder)


def location_of(repo: Repository, key: str) -> str:
    return f"{repo.location}/{key}"


def stored_files(files) -> list[StoredFile]:
    return [StoredFile(path=f.path, size=f.size, sha256=f.sha256, pieces=list(f.pieces)) for f in files]


def failure(err: BaseException, what: str) -> Refusal:
    """A store's refusal as the gateway's: its code where it means something to the caller, else UNAVAILABLE."""
    if isinstance(err, grpc.aio.AioRpcError):
        passed = {grpc.StatusCode.NOT_FOUND, grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.UNIMPLEMENTED,
                  grpc.StatusCode.ALREADY_EXISTS, grpc.StatusCode.INVALID_ARGUMENT}
        code = err.code() if err.code() in passed else grpc.StatusCode.UNAVAILABLE
        return Refusal(f"{what}: {err.details()}", code)
    return Refusal(f"{what}: {err}", grpc.StatusCode.UNAVAILABLE)


class Snapshots:
    def __init__(self, settings: Settings, backends: Backends, catalog: Catalog, order: WriteOrder) -> None:
        self.settings, self.backends, self.catalog, self.order = settings, backends, catalog, order
        self.redis = order.redis
        self.holds = Holds(self.redis)
        self.keys = KeysFile(keys_path(settings))

    def _stores(self):
        return ((Store.BM25, self.backends.bm25), (Store.VECTOR, self.backends.vector))

    def _repository(self, location: str) -> Repository:
        try:
            return open_repository(location, self.settings)
        except RepositoryError as err:
            raise Refusal(str(err), grpc.StatusCode.INVALID_ARGUMENT) from None

    # --- create ------------------------------------------------------------------------------------------

    async def create(self, collection: str, repository: str) -> snapshots_pb2.CreateSnapshotResponse:
        collection = check_written_collection(collection)
        repo = self._repository(repository)
        if await self.catalog.missing([collection]):
            raise Refusal(f"collection {collection!r} does not exist", grpc.StatusCode.NOT_FOUND)
        stored = (await self.catalog.stored([collection]))[collection]  # an alias: its serving generation
        started = time.monotonic()
        sid = snapshot_id(collection)
        lease = f"{LEASES}/{sid}.json"
        await asyncio.to_thread(repo.write, lease, json.dumps({"at": datetime.now(timezone.utc).isoformat()}).encode())
        try:
            async with self._held(collection, CREATE_HOLDER):
                manifest = await self._take(collection, stored, sid, repo)
            key = manifest_key(collection, sid)
            async with self._repository_hold(repo):
                missing = await asyncio.to_thread(lambda: [p for p in manifest.pieces() if not repo.exists(piece_key(p))])
                if missing:  # collected by a delete that ran while the pieces were written: nothing is kept
                    raise Refusal(f"{len(missing)} pieces of the snapshot were removed by a snapshot delete that ran "
                                  "meanwhile; take the snapshot again", grpc.StatusCode.UNAVAILABLE)
                await asyncio.to_thread(repo.write, key, manifest.sealed().encode())
        except RepositoryError as err:
            raise Refusal(f"the repository {repo.location}: {err}", grpc.StatusCode.UNAVAILABLE) from None
        finally:
            await asyncio.to_thread(repo.delete, lease)
        return snapshots_pb2.CreateSnapshotResponse(
            snapshot=info(manifest, location_of(repo, key), time.monotonic() - started))

    async def _take(self, collection: str, stored: str, sid: str, repo: Repository) -> Manifest:
        """Both stores' parts (of `stored`, the collection's name in the stores): their states taken while this
        gateway's writes of the collection are held."""
        request = stores_pb2.SnapshotStoreRequest(collection=stored, snapshot_id=sid, repository=repo.location)
        calls = []
        try:
            async with self.order.local.dropping(collection):  # the calls start here: a store takes its state at once
                paused = time.monotonic()
                calls += [(store, stub.SnapshotCollection(request, timeout=STORE_TIMEOUT_S))
                          for store, stub in self._stores()]
                taken = await asyncio.gather(*(call.read() for _, call in calls), return_exceptions=True)
                pause_ms = (time.monotonic() - paused) * 1000
            self._check(taken, calls, "taking the collection's state")
            written = await asyncio.gather(*(call.read() for _, call in calls), return_exceptions=True)
            self._check(written, calls, "writing the snapshot's files")
        finally:
            for _, call in calls:
                call.cancel()
        parts = [StorePart(store=store, engine=first.engine, documents=first.documents, chunks=first.chunks,
                           details=dict(first.details), files=stored_files(last.files))
                 for (store, _), first, last in zip(calls, taken, written)]
        config = collection_config(self.settings, collection)
        keys = self.keys.collection(collection) if config.sealed else None
        return Manifest(
            id=sid, collection=collection, created_at=datetime.now(timezone.utc), write_pause_ms=round(pause_ms, 2),
            collection_config=config.model_dump(mode="json"),
            embedder=next(p for p in parts if p.store == Store.VECTOR).details.get("embedder", self.settings.vector.embedder),
            embedder_fingerprint=embedder_fingerprint(next(p for p in parts if p.store == Store.VECTOR)),
            sealed_key_ids=keys.key_ids if keys is not None else [], parts=parts,
            sealed_as=(keys.sealed_as or collection) if keys is not None else "",
            bytes_total=sum(p.size for p in parts), bytes_new=sum(last.bytes_written for last in written))

    @staticmethod
    def _check(answers: list, calls: list, what: str) -> None:
        for (store, _), answer in zip(calls, answers):
            if isinstance(answer, BaseException):
                raise failure(answer, f"the {store.value} store, {what}")
            if answer is grpc.aio.EOF:
                raise Refusal(f"the {store.value} store ended its part early, {what}", grpc.StatusCode.UNAVAILABLE)

    # --- list and delete ---------------------------------------------------------------------------------

    async def list(self, repository: str, collection: str) -> snapshots_pb2.ListSnapshotsResponse:
        repo = self._repository(repository)
        prefix = f"{MANIFESTS}/{check_collection(collection)}/" if collection else f"{MANIFESTS}/"
        out = snapshots_pb2.ListSnapshotsResponse()
        try:
            manifests = await asyncio.to_thread(self._manifests, repo, prefix)
        except RepositoryError as err:
            raise Refusal(str(err), grpc.StatusCode.UNAVAILABLE) from None
        for key, manifest in sorted(manifests.items(), key=lambda kv: str(getattr(kv[1], "created_at", "")),
                                    reverse=True):
            if isinstance(manifest, Manifest):
                out.snapshots.append(info(manifest, location_of(repo, key)))
            else:
                out.notices.append(f"{location_of(repo, key)}: {manifest}")
        return out

    @staticmethod
    def _manifests(repo: Repository, prefix: str = f"{MANIFESTS}/") -> dict[str, Manifest | str]:
        """Every manifest under `prefix`, read and checked; a string saying why for one that is not whole."""
        out: dict[str, Manifest | str] = {}
        for key in repo.keys(prefix):
            if key.endswith(".json"):
                try:
                    out[key] = parse(repo.read(key), key)
                except (ManifestError, RepositoryError) as err:
                    out[key] = str(err)
        return out

    async def delete(self, location: str) -> snapshots_pb2.DeleteSnapshotResponse:
        repo, key = self._located(location)
        try:
            if not await asyncio.to_thread(repo.exists, key):
                raise Refusal(f"no snapshot at {location}", grpc.StatusCode.NOT_FOUND)
            await asyncio.to_thread(repo.delete, key)
            return await self._collect(repo)
        except RepositoryError as err:
            raise Refusal(f"the repository {repo.location}: {err}", grpc.StatusCode.UNAVAILABLE) from None

    async def _collect(self, repo: Repository) -> snapshots_pb2.DeleteSnapshotResponse:
        """The pieces no manifest names, removed in batches, each under the repository's hold and only while
        no snapshot is being taken (a live lease): otherwise they are kept and counted."""
        manifests = await asyncio.to_thread(self._manifests, repo)
        unreadable = [key for key, m in manifests.items() if not isinstance(m, Manifest)]
        named = {p for m in manifests.values() if isinstance(m, Manifest) for p in m.pieces()}
        unnamed = [k for k in await asyncio.to_thread(lambda: list(repo.keys("pieces/")))
                   if (p := piece_of(k)) is not None and p not in named]
        out = snapshots_pb2.DeleteSnapshotResponse()
        if unreadable:  # its pieces cannot be told apart: none is removed
            out.pieces_kept = len(unnamed)
            return out
        for start in range(0, len(unnamed), GC_BATCH):
            batch = unnamed[start:start + GC_BATCH]
            async with self._repository_hold(repo):
                if await asyncio.to_thread(self._live_leases, repo):
                    out.pieces_kept += len(unnamed) - start
                    return out
                await asyncio.to_thread(lambda: [repo.delete(k) for k in batch])
            out.pieces_deleted += len(batch)
        return out

    @staticmethod
    def _live_leases(repo: Repository) -> int:
        live = 0
        for key in repo.keys(f"{LEASES}/"):
            try:
                at = datetime.fromisoformat(json.loads(repo.read(key))["at"])
            except (RepositoryError, ValueError, KeyError):
                continue
            live += datetime.now(timezone.utc) - at < LEASE_TTL
        return live

    # --- restore -----------------------------------------------------------------------------------------

    def _located(self, location: str) -> tuple[Repository, str]:
        try:
            root, key = split_location(location)
        except RepositoryError as err:
            raise Refusal(str(err), grpc.StatusCode.INVALID_ARGUMENT) from None
        return self._repository(root), key

    async def _manifest(self, location: str) -> tuple[Repository, Manifest]:
        repo, key = self._located(location)
        try:
            text = await asyncio.to_thread(repo.read, key)
        except RepositoryError as err:
            raise Refusal(f"no snapshot at {location} ({err})", grpc.StatusCode.NOT_FOUND) from None
        try:
            return repo, parse(text, location)
        except ManifestError as err:
            raise Refusal(str(err), grpc.StatusCode.FAILED_PRECONDITION) from None

    async def restore(self, location: str, target: str) -> snapshots_pb2.RestoreSnapshotResponse:
        started = time.monotonic()
        repo, manifest = await self._manifest(location)
        target = check_written_collection(target or manifest.collection)
        check_fits(self.settings, self.keys, manifest, target)
        mark = restoring_key(target)
        try:
            if await self.catalog.aliases.get(target) is not None:
                raise Refusal(f"{target!r} is an alias: drop it, or restore under another name",
                              grpc.StatusCode.ALREADY_EXISTS)
            pending = await self.redis.get(mark)
        except (RedisError, OSError) as err:
            raise Refusal(f"Redis is not reachable ({type(err).__name__}): a restore needs it; retry") from None
        pending = pending.decode() if isinstance(pending, bytes) else pending
        if pending is None and not await self.catalog.missing([target]):
            raise Refusal(f"collection {target!r} exists: restore under another name (-c NEW), or drop it first",
                          grpc.StatusCode.ALREADY_EXISTS)
        if pending is not None and pending != location:
            raise Refusal(f"a restore of {target!r} from {pending} was cut short: run it again to finish it, or drop "
                          f"{target!r} to clear it", grpc.StatusCode.FAILED_PRECONDITION)
        async with self._held(target, RESTORE_HOLDER):  # writes of it wait, then are refused while marked
            await self.redis.set(mark, location)
            read = await self._install(repo, manifest, target, resume=pending is not None)
            await self.redis.delete(mark)
        self.catalog.forget(target)
        bm25 = manifest.part(Store.BM25)
        return snapshots_pb2.RestoreSnapshotResponse(collection=target, documents=bm25.documents, chunks=bm25.chunks,
                                                     bytes_read=read, seconds=time.monotonic() - started)

    async def _install(self, repo: Repository, manifest: Manifest, target: str, resume: bool) -> int:
        """Both stores' parts prepared (read, checked), then committed; a part that cannot be read is aborted in
        both and refused (the mark goes: nothing was moved in)."""
        def request(store: Store, phase: int) -> stores_pb2.RestoreStoreRequest:
            files = manifest.part(store).files if phase == stores_pb2.RESTORE_PHASE_PREPARE else []
            return stores_pb2.RestoreStoreRequest(
                collection=target, repository=repo.location, phase=phase, resume=resume,
                engine=manifest.part(store).engine if phase == stores_pb2.RESTORE_PHASE_PREPARE else "",
                files=[stores_pb2.SnapshotFile(path=f.path, size=f.size, sha256=f.sha256, pieces=f.pieces) for f in files])

        async def each(phase: int) -> list:
            return await asyncio.gather(*(stub.RestoreCollection(request(store, phase), timeout=STORE_TIMEOUT_S)
                                          for store, stub in self._stores()), return_exceptions=True)

        prepared = await each(stores_pb2.RESTORE_PHASE_PREPARE)
        failed = [(store, a) for (store, _), a in zip(self._stores(), prepared) if isinstance(a, BaseException)]
        if failed:
            store, err = failed[0]
            refusal = failure(err, f"the {store.value} store could not read its part of the snapshot")
            if refusal.code == grpc.StatusCode.FAILED_PRECONDITION:  # corrupted or partial: it will not get better
                await each(stores_pb2.RESTORE_PHASE_ABORT)
                await self.redis.delete(restoring_key(target))
                refusal = Refusal(f"{refusal} (nothing was restored)", refusal.code)
            raise refusal
        committed = await each(stores_pb2.RESTORE_PHASE_COMMIT)
        for (store, _), answer in zip(self._stores(), committed):
            if isinstance(answer, BaseException):
                raise failure(answer, f"the {store.value} store could not move its part in (run the restore again "
                                      "to finish it)")
        return sum(a.bytes_written for a in prepared)

    # --- holds -------------------------------------------------------------------------------------------

    def _held(self, collection: str, holder: str):
        return _Hold(self.holds, collection, holder)

    def _repository_hold(self, repo: Repository):
        name = "repository:" + hashlib.sha256(repo.location.encode()).hexdigest()[:16]
        return _Hold(self.holds, name, DELETE_HOLDER, wait_s=REPOSITORY_WAIT_S)


class _Hold:
    """A hold as an async context manager whose failures are Refusals: Held (someone else's hold) is
    FAILED_PRECONDITION, or waited out for `wait_s`; Redis unreachable is UNAVAILABLE."""

    def __init__(self, holds: Holds, name: str, holder: str, wait_s: float = 0.0) -> None:
        self.holds, self.name, self.holder, self.wait_s = holds, name, holder, wait_s
        self._cm = None

    async def __aenter__(self):
        deadline = time.monotonic() + self.wait_s
        while True:
            self._cm = self.holds.hold(self.name, self.holder)
            try:
                return await self._cm.__aenter__()
            except Held as err:
                if time.monotonic() >= deadline:
                    raise Refusal(f"{err}: try again when it is done", grpc.StatusCode.FAILED_PRECONDITION) from None
                await asyncio.sleep(0.2)
            except (RedisError, OSError) as err:
                raise Refusal(f"Redis (holds) is not reachable ({type(err).__name__}); retry") from None

    async def __aexit__(self, *exc):
        return await self._cm.__aexit__(*exc)


def embedder_fingerprint(vector: StorePart) -> str:
    """What the vectors were made with: the vector store's engine (store + embedder) and dimension."""
    return f"{vector.engine} dim={vector.details.get('dim', '?')}"
