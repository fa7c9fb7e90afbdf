"""The local engines' collections: a folder each under the engine's root, known by a marker file
(bm25s: store.sqlite, tantivy: meta.json), opened lazily into `_collections`; dropping one closes it (the
engine's own `_close`: a write in progress ends first) and removes its folder."""

from __future__ import annotations

import asyncio
import os
import shutil
import threading
from pathlib import Path

from hybridsearch.storage.stores import CollectionExists


class FolderCollections:
    """What both local engines do with their collections' folders. Subclasses set MARKER, `root`,
    `_collections`, `_open_lock`, and close an opened collection in `_close`."""

    MARKER: str
    root: Path
    _collections: dict
    _open_lock: threading.Lock

    def _exists(self, name: str) -> bool:
        return name in self._collections or (self.root / name / self.MARKER).exists()

    async def collections(self) -> list[str]:
        on_disk = {p.name for p in self.root.iterdir() if (p / self.MARKER).exists()} if self.root.is_dir() else set()
        return sorted(on_disk | set(self._collections))

    async def drop(self, collection: str) -> bool:
        if not self._exists(collection):
            return False
        await self._settle(collection)
        self._forget(collection)
        await asyncio.to_thread(self._drop, collection)
        return True

    async def _settle(self, name: str) -> None:
        """Waits for the writes already handed to the collection (nothing to wait for unless overridden)."""

    def _forget(self, name: str) -> None:
        """What the engine keeps of a collection besides its opened index (nothing unless overridden)."""

    def _drop(self, name: str) -> None:
        with self._open_lock:
            opened = self._collections.pop(name, None)
        if opened is not None:
            self._close(opened)
        shutil.rmtree(self.root / name, ignore_errors=True)

    def _close(self, opened) -> None:
        raise NotImplementedError

    async def capture(self, collection: str, folder: Path) -> bool:
        if not self._exists(collection):
            return False
        await self._settle(collection)  # the writes handed over are in
        await asyncio.to_thread(self._capture, collection, folder)
        return True

    def _capture(self, name: str, folder: Path) -> None:
        raise NotImplementedError

    async def verify_restorable(self, folder: Path) -> None:
        """The part is the collection's files, checked piece by piece as they were read: nothing else to check."""

    async def install(self, collection: str, folder: Path) -> None:
        await asyncio.to_thread(self._install, collection, folder)

    def _install(self, name: str, folder: Path) -> None:
        with self._open_lock:
            target = self.root / name
            if self._exists(name) or target.exists():
                raise CollectionExists(f"{self.name} already holds collection {name!r}")
            target.parent.mkdir(parents=True, exist_ok=True)
            os.rename(folder, target)  # one step: the collection is there whole, or not at all
