"""Write/stat RPCs that the BM25 and vector services share: both are stores of chunks."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from functools import cached_property
from typing import TypeVar

import asyncio
import logging
import re
import shutil
import time
from pathlib import Path

import grpc

from hybridsearch.config.settings import get_settings
from hybridsearch.storage.gates import CollectionGates
from hybridsearch.contract.limits import MAX_CHUNKS_PER_REQUEST, MAX_LEG_LIMIT, MAX_LEG_QUERIES
from hybridsearch.storage.stores import (
    WHOLE_COLLECTION_DETAILS,
    CollectionExists,
    EngineUnavailable,
    SnapshotMissing,
    SnapshotsUnsupported,
    store_of,
)
from hybridsearch.contract.validation import FIELD_NAME, check_collection, check_doc_id, check_doc_ids, check_filters, check_metadata
from hybridsearch.security.acl import of_request
from hybridsearch.contract.errors import InvalidArgument, Refusal, abort_invalid
from hybridsearch.v1 import common_pb2, stores_pb2

log = logging.getLogger(__name__)
SNAPSHOT_ID = re.compile(r"[A-Za-z0-9_.-]{1,200}")
STALE_STAGING_S = 6 * 3600  # a staging folder this old was left by a snapshot that died: removed at the next one
MAX_METADATA_FIELDS = 64  # metadata keys a leg search may ask back with its hits (boosts, tags, the fields hits show)

LIST_PAGE = 5000  # documents per ListDocuments page (~80 bytes each)


def check_leg_search(request: common_pb2.LegSearchRequest) -> tuple[str, list[common_pb2.MetadataFilter]]:
    """(collection, filters) of a valid leg search; raises InvalidArgument otherwise."""
    collection = check_collection(request.collection)
    filters = check_filters(request.filters)
    if not 0 < len(request.queries) <= MAX_LEG_QUERIES:
        raise InvalidArgument(f"send 1-{MAX_LEG_QUERIES} queries, got {len(request.queries)}")
    if not 0 < request.limit <= MAX_LEG_LIMIT:
        raise InvalidArgument(f"limit must be 1-{MAX_LEG_LIMIT}, got {request.limit}")
    if not 0 <= request.feedback_docs <= 50:
        raise InvalidArgument("feedback_docs must be 0-50")
    if not 0 <= request.text_depth <= MAX_LEG_LIMIT:
        raise InvalidArgument(f"text_depth must be 0-{MAX_LEG_LIMIT}, got {request.text_depth}")
    check_metadata_fields(request.metadata_fields)
    return collection, filters


def trim_texts(lists, text_depth: int):
    """The lists with title and text cleared on every hit ranked below `text_depth` (0: all kept).

    Texts are most of a leg's answer (100 SciFact hits: 161 KB, 9 in 10 bytes of it text) and the gateway
    shows and reranks only the head of the fused list; it reads the few deeper texts it needs from the store."""
    if text_depth:
        for ranked in lists:
            for hit in ranked.hits[text_depth:]:
                hit.ClearField("title")
                hit.ClearField("text")
                hit.ClearField("sealed")
    return lists


def check_metadata_fields(fields) -> tuple[str, ...]:
    """The metadata keys a search asks back with its hits, checked."""
    if len(fields) > MAX_METADATA_FIELDS:
        raise InvalidArgument(f"at most {MAX_METADATA_FIELDS} metadata_fields, got {len(fields)}")
    for i, name in enumerate(fields):
        if not FIELD_NAME.fullmatch(name):
            raise InvalidArgument(f"metadata_fields[{i}] {name[:80]!r} is not a metadata key ([A-Za-z0-9_-]{{1,64}})")
    return tuple(fields)

T = TypeVar("T")



def check_chunks(request) -> str:
    """A write's collection (checked), after its chunks: how many, their ids and metadata; InvalidArgument."""
    collection = check_collection(request.collection)
    if len(request.chunks) > MAX_CHUNKS_PER_REQUEST:
        raise InvalidArgument(f"at most {MAX_CHUNKS_PER_REQUEST} chunks a request")
    for i, c in enumerate(request.chunks):
        check_doc_id(c.doc_id)
        if not c.chunk_id.startswith(c.doc_id + "#"):
            raise InvalidArgument(f"chunk id {c.chunk_id!r} does not belong to document {c.doc_id!r}")
        check_metadata(c.metadata, f"chunks[{i}] ({c.chunk_id!r})")
    return collection


def written(result) -> common_pb2.UpsertChunksResponse:
    return common_pb2.UpsertChunksResponse(documents_written=result.documents_written,
                                           documents_unchanged=result.documents_unchanged,
                                           chunks_written=result.chunks_written)


async def checked(context: grpc.aio.ServicerContext, check: Callable[..., T], *args) -> T:
    """What `check(*args)` returns; the call ended INVALID_ARGUMENT with its message when it refuses."""
    try:
        return check(*args)
    except InvalidArgument as err:
        await abort_invalid(context, err)
        raise  # abort_invalid ends the call; never reached


def documents_of(request) -> tuple[str, list[str]]:
    """The collection and the document ids a request names, checked."""
    return check_collection(request.collection), check_doc_ids(request.doc_ids)

class StoreServicerMixin:
    """Needs `self.engine` with upsert/delete/stats/content_hashes/collections/drop (bm25.engine.LexicalEngine).
    Every call on a collection passes its gate (storage/gates.py); a drop passes it alone."""

    @cached_property
    def gates(self) -> CollectionGates:
        return CollectionGates()

    async def _call_engine(self, context: grpc.aio.ServicerContext, call: Awaitable[T]) -> T:
        """A store that cannot answer (cluster down, timeout) is UNAVAILABLE: the caller may retry."""
        try:
            return await call
        except EngineUnavailable as err:
            await context.abort(grpc.StatusCode.UNAVAILABLE, f"{self.engine.name}: {err}")
        # What the engine cannot take (a sealed chunk on an engine without them: INVALID_ARGUMENT; a collection
        # whose embedder the vector service cannot open: FAILED_PRECONDITION), with the refusal's code.
        except Refusal as err:
            await abort_invalid(context, err)

    async def _on(self, collection: str, context: grpc.aio.ServicerContext, call: Awaitable[T]) -> T:
        """`_call_engine` through the collection's gate: never while the collection is being dropped."""
        entered = False
        try:
            async with self.gates.using(collection):
                entered = True
                return await self._call_engine(context, call)
        finally:
            if not entered and hasattr(call, "close"):  # cancelled at the gate: the call never started
                call.close()

    async def UpsertChunks(self, request: common_pb2.UpsertChunksRequest,
                           context: grpc.aio.ServicerContext) -> common_pb2.UpsertChunksResponse:
        collection = await checked(context, check_chunks, request)
        return written(await self._on(collection, context, self.engine.upsert(collection, list(request.chunks))))

    async def ResealChunks(self, request: common_pb2.ResealChunksRequest,
                           context: grpc.aio.ServicerContext) -> common_pb2.UpsertChunksResponse:
        """`keys rotate`: documents sealed again, each only while it is as it was read (ResealChunksRequest)."""
        try:
            collection = check_chunks(request)
            for i, c in enumerate(request.chunks):
                if not c.HasField("sealed"):
                    raise InvalidArgument(f"chunks[{i}] ({c.chunk_id!r}) is not sealed: only sealed records are resealed")
                if c.doc_id not in request.expected_hashes:
                    raise InvalidArgument(f"chunks[{i}] ({c.chunk_id!r}): no expected hash for document {c.doc_id!r}")
        except InvalidArgument as err:
            await abort_invalid(context, err)
        return written(await self._on(collection, context, self.engine.reseal(collection, list(request.chunks),
                                                                           dict(request.expected_hashes))))

    async def DeleteDocuments(self, request: common_pb2.DeleteDocumentsRequest,
                              context: grpc.aio.ServicerContext) -> common_pb2.DeleteDocumentsResponse:
        collection, doc_ids = await checked(context, documents_of, request)
        docs, chunks = await self._on(collection, context, self.engine.delete(collection, doc_ids))
        return common_pb2.DeleteDocumentsResponse(documents_deleted=docs, chunks_deleted=chunks)

    async def Stats(self, request: common_pb2.StoreStatsRequest,
                    context: grpc.aio.ServicerContext) -> common_pb2.StoreStats:
        collection = await checked(context, check_collection, request.collection)
        readers = of_request(request)
        stats = await self._on(collection, context, self.engine.stats(collection, readers))
        details = stats.details if readers is None else \
            {k: v for k, v in stats.details.items() if k not in WHOLE_COLLECTION_DETAILS}
        return common_pb2.StoreStats(engine=stats.engine, documents=stats.documents, chunks=stats.chunks, details=details)

    async def ListDocuments(self, request: common_pb2.ListDocumentsRequest,
                            context: grpc.aio.ServicerContext) -> AsyncIterator[common_pb2.ListDocumentsPage]:
        """Every stored document in pages of LIST_PAGE (one listing, streamed)."""
        collection = await checked(context, check_collection, request.collection)
        documents = await self._on(collection, context, self.engine.list_documents(collection))
        for start in range(0, len(documents), LIST_PAGE):
            yield common_pb2.ListDocumentsPage(documents=documents[start:start + LIST_PAGE])

    async def GetChunks(self, request: common_pb2.GetChunksRequest,
                        context: grpc.aio.ServicerContext) -> common_pb2.GetChunksResponse:
        collection, doc_ids = await checked(context, documents_of, request)
        return common_pb2.GetChunksResponse(chunks=await self._on(collection, context, self.engine.get_chunks(collection, doc_ids)))

    async def ContentHashes(self, request: common_pb2.ContentHashesRequest,
                            context: grpc.aio.ServicerContext) -> common_pb2.ContentHashesResponse:
        collection, doc_ids = await checked(context, documents_of, request)
        return common_pb2.ContentHashesResponse(
            hashes=await self._on(collection, context, self.engine.content_hashes(collection, doc_ids))
        )

    async def ListCollections(self, request: stores_pb2.StoreCollectionsRequest,
                              context: grpc.aio.ServicerContext) -> stores_pb2.StoreCollectionsResponse:
        """The collections held (those of `names` only, when given), counted when asked."""
        wanted = await checked(context, lambda: {check_collection(name) for name in request.names})
        held = await self._call_engine(context, self.engine.collections())
        out = stores_pb2.StoreCollectionsResponse(engine=self.engine.name)
        for name in held:
            if wanted and name not in wanted:
                continue
            listed = out.collections.add(name=name)
            if request.counts:
                stats = await self._on(name, context, self.engine.stats(name))
                listed.documents, listed.chunks = stats.documents, stats.chunks
        return out

    async def DropCollection(self, request: stores_pb2.DropStoreCollectionRequest,
                             context: grpc.aio.ServicerContext) -> stores_pb2.DropStoreCollectionResponse:
        """The collection removed with what it held; dropped = False when it was not there."""
        collection = await checked(context, check_collection, request.collection)
        async with self.gates.dropping(collection):  # alone: the calls inside end first, the later ones wait
            if isinstance(self, StoreSnapshotsMixin):  # what a restore cut short had staged goes too
                await asyncio.to_thread(shutil.rmtree, self._restoring(collection), True)
            if collection not in await self._call_engine(context, self.engine.collections()):
                return stores_pb2.DropStoreCollectionResponse(dropped=False)
            stats = await self._call_engine(context, self.engine.stats(collection))
            dropped = await self._call_engine(context, self.engine.drop(collection))
        return stores_pb2.DropStoreCollectionResponse(dropped=dropped, documents=stats.documents, chunks=stats.chunks)


class StoreSnapshotsMixin:
    """A store's part of snapshots and restores (hybridsearch.snapshots): needs `self.engine` with capture/install
    and `self.gates` (StoreServicerMixin). Staging folders live on the engine's disk, under
    data_dir/snapshots/work/<engine>/, so that a restored collection moves into place in one rename."""

    @property
    def _work(self) -> Path:
        return get_settings().data_dir / "snapshots" / "work" / self.engine.name

    def _restoring(self, collection: str) -> Path:
        return self._work / "restoring" / collection

    async def SnapshotCollection(self, request: stores_pb2.SnapshotStoreRequest,
                                 context: grpc.aio.ServicerContext) -> AsyncIterator[stores_pb2.SnapshotStoreProgress]:
        from hybridsearch.snapshots.repository import RepositoryError, open_repository, upload_folder

        try:
            collection = check_collection(request.collection)
            if not SNAPSHOT_ID.fullmatch(request.snapshot_id):
                raise InvalidArgument(f"snapshot_id {request.snapshot_id[:80]!r} is not [A-Za-z0-9_.-]{{1,200}}")
            repo = open_repository(request.repository, get_settings())
        except (InvalidArgument, RepositoryError) as err:
            await abort_invalid(context, InvalidArgument(str(err)))
        staging = self._work / "staging" / request.snapshot_id
        await asyncio.to_thread(remove_stale, self._work / "staging")
        try:
            async with self.gates.using(collection):  # searches go on; the gateway holds the writes
                held = await self._snapshot_call(context, self.engine.capture(collection, staging))
                stats = await self._snapshot_call(context, self.engine.stats(collection)) if held else None
            if not held:
                await context.abort(grpc.StatusCode.NOT_FOUND, f"{self.engine.name} holds no collection {collection!r}")
            yield stores_pb2.SnapshotStoreProgress(captured=True, documents=stats.documents, chunks=stats.chunks,
                                                   engine=self.engine.name, details=stats.details)
            try:
                files, written = await asyncio.to_thread(upload_folder, repo, staging)
            except RepositoryError as err:
                await context.abort(grpc.StatusCode.UNAVAILABLE, f"{self.engine.name}: {err}")
            yield stores_pb2.SnapshotStoreProgress(
                files=[stores_pb2.SnapshotFile(path=f.path, size=f.size, sha256=f.sha256, pieces=f.pieces) for f in files],
                bytes_written=written)
        finally:
            await asyncio.to_thread(shutil.rmtree, staging, True)

    async def _snapshot_call(self, context, call):
        try:
            return await self._call_engine(context, call)
        except SnapshotsUnsupported as err:
            await context.abort(grpc.StatusCode.UNIMPLEMENTED, str(err))

    async def RestoreCollection(self, request: stores_pb2.RestoreStoreRequest,
                                context: grpc.aio.ServicerContext) -> stores_pb2.RestoreStoreResponse:
        from hybridsearch.snapshots.manifest import StoredFile
        from hybridsearch.snapshots.repository import RepositoryError, download_files, open_repository

        collection = await checked(context, check_collection, request.collection)
        staging = self._restoring(collection)
        phase = request.phase
        if phase in (stores_pb2.RESTORE_PHASE_PREPARE, stores_pb2.RESTORE_PHASE_COMMIT) and \
                collection in await self._call_engine(context, self.engine.collections()):
            if not request.resume:
                await context.abort(grpc.StatusCode.ALREADY_EXISTS,
                                    f"{self.engine.name} already holds collection {collection!r}")
            await asyncio.to_thread(shutil.rmtree, staging, True)  # moved in by the run that was cut short
            return stores_pb2.RestoreStoreResponse(installed=True)
        if phase == stores_pb2.RESTORE_PHASE_PREPARE:
            if request.engine and store_of(request.engine) != store_of(self.engine.name):
                await context.abort(grpc.StatusCode.FAILED_PRECONDITION,
                                    f"the snapshot's part was taken on {store_of(request.engine)}; this store runs "
                                    f"{store_of(self.engine.name)}, which cannot open its files: restore it into a "
                                    "deployment on that engine, then re-index or copy the documents over")
            files = [StoredFile(path=f.path, size=f.size, sha256=f.sha256, pieces=list(f.pieces)) for f in request.files]
            try:
                repo = open_repository(request.repository, get_settings())
                written = await asyncio.to_thread(download_files, repo, files, staging, f"{self.engine.name} {collection}")
            except RepositoryError as err:
                await context.abort(grpc.StatusCode.FAILED_PRECONDITION, str(err))
            try:  # a part naming data held elsewhere (OpenSearch: the cluster's snapshot) is checked to be there
                await self._call_engine(context, self.engine.verify_restorable(staging))
            except SnapshotMissing as err:
                await context.abort(grpc.StatusCode.FAILED_PRECONDITION, f"{self.engine.name}: {err}")
            return stores_pb2.RestoreStoreResponse(bytes_written=written)
        if phase == stores_pb2.RESTORE_PHASE_COMMIT:
            async with self.gates.dropping(collection):  # nothing else on the collection while it moves in
                if not staging.exists():
                    await context.abort(grpc.StatusCode.FAILED_PRECONDITION,
                                        f"{self.engine.name}: nothing is prepared for collection {collection!r}")
                try:
                    await self._snapshot_call(context, self.engine.install(collection, staging))
                except CollectionExists as err:
                    await context.abort(grpc.StatusCode.ALREADY_EXISTS, str(err))
                await asyncio.to_thread(shutil.rmtree, staging, True)  # what an engine read in place (OpenSearch's record)
            return stores_pb2.RestoreStoreResponse(installed=True)
        if phase == stores_pb2.RESTORE_PHASE_ABORT:
            await asyncio.to_thread(shutil.rmtree, staging, True)
            return stores_pb2.RestoreStoreResponse()
        await abort_invalid(context, InvalidArgument("phase must be PREPARE, COMMIT or ABORT"))


def remove_stale(folder: Path) -> None:
    """Staging folders left by snapshots that died (older than STALE_STAGING_S)."""
    if not folder.is_dir():
        return
    for entry in folder.iterdir():
        if time.time() - entry.stat().st_mtime > STALE_STAGING_S:
            log.info("removing %s, left by a snapshot that did not finish", entry)
            shutil.rmtree(entry, ignore_errors=True)
