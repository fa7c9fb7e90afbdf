"""Group commit: concurrent writes to one store share one durable commit.

Why. A tantivy commit (its durable point) waits for the disk: tens of milliseconds, whatever the batch
holds. Committed one request at a time, writers queue behind each other's fsync, and small writes (one
document, a delete) are nearly all fsync. As databases do, the writes that arrive while a commit is in
flight wait for it to finish and then go down together, in arrival order, in the next one: one fsync
for all of them, each acknowledged only once that commit has returned (nothing is acknowledged before it is
durable). A lone writer still gets its own commit at once: no timer, no added latency.

`GroupCommit(apply)` is the asynchronous front: `await submit(write)` queues a write and returns its own
result. `apply(writes) -> results` is the store's synchronous side (run in a worker thread): it applies
the writes in order and commits once, returning one result per write (an exception for a write that
failed alone). A group is at most `max_group` writes. Waiting writers hold no thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

W = TypeVar("W")  # a write
R = TypeVar("R")  # its result

MAX_GROUP = 64  # writes per commit at most: a group's latency and memory stay bounded


class GroupCommit(Generic[W, R]):
    """One store's write queue; a drain task commits what queued while the previous commit ran."""

    def __init__(self, apply: Callable[[Sequence[W]], list[R | BaseException]], max_group: int = MAX_GROUP) -> None:
        self.apply = apply
        self.max_group = max_group
        self._queue: list[tuple[W, asyncio.Future]] = []
        self._drain: asyncio.Task | None = None
        self.commits = 0  # groups the store applied, each in at most one commit (tests and bm25-scale read it)

    async def submit(self, write: W) -> R:
        """The write's result once its group has been committed; its exception if it failed."""
        future = asyncio.get_running_loop().create_future()
        future.add_done_callback(_retrieved)  # a caller that gave up leaves no "never retrieved" warning
        self._queue.append((write, future))
        if self._drain is None or self._drain.done():
            self._drain = asyncio.create_task(self._run())
        # Shielded: a caller that gives up (deadline, cancel) does not take its write out of a group
        # already being applied; the write still lands or fails as a whole, as an uncancellable thread would.
        return await asyncio.shield(future)

    async def idle(self) -> None:
        """Returns once every write submitted so far has been applied (or has failed): nothing is queued or
        in flight. A drop waits for this before it closes the store the writes go to."""
        while self._drain is not None and not self._drain.done():
            await asyncio.gather(asyncio.shield(self._drain), return_exceptions=True)

    async def _run(self) -> None:
        while self._queue:
            group, self._queue = self._queue[:self.max_group], self._queue[self.max_group:]
            try:
                results = await asyncio.to_thread(self.apply, [w for w, _ in group])
            except asyncio.CancelledError:  # the service is stopping: nobody is left waiting for an answer
                for _, future in group + self._queue:
                    future.cancel()
                self._queue = []
                raise
            except Exception as err:  # the store itself failed (not one write): the whole group did
                results = [err] * len(group)
            else:
                self.commits += 1
            _settle(group, results)


def _retrieved(future: asyncio.Future) -> None:
    if not future.cancelled():
        future.exception()


def _settle(group: list[tuple[object, asyncio.Future]], results: list) -> None:
    for (_, future), result in zip(group, results, strict=True):
        if future.done():
            continue
        if isinstance(result, BaseException):
            future.set_exception(result)
        else:
            future.set_result(result)
