"""The straggler rule of a round of leg calls: once the first call of the round answers, the others get
max(grace_s, factor x its time) more, then are cut (gateway.query.deadline.Straggler)."""

from __future__ import annotations

import asyncio
import time

from hybridsearch.gateway.query.deadline import Straggler


class Stragglers:
    """One round's cut-off for a late call: armed by the first call of the round that answers, it gives the
    others max(grace_s, factor x that first call's time) more. A round is the calls that start together
    (the original queries of every leg; later, the variant queries), so each is judged against its like."""

    def __init__(self, grace_s: float, factor: float) -> None:
        self.grace_s, self.factor = grace_s, factor
        self.started = time.perf_counter()
        self.first = asyncio.Event()
        self.first_s = 0.0
        self.cutoff = asyncio.ensure_future(self._cutoff())

    def answered(self) -> None:
        if not self.first.is_set():
            self.first_s = time.perf_counter() - self.started
            self.first.set()

    async def _cutoff(self) -> float:
        await self.first.wait()
        grace = max(self.grace_s, self.factor * self.first_s)
        await asyncio.sleep(grace)
        return grace

    async def call(self, call):
        """The call's answer, unless the cut-off comes first: then the call is cancelled and Straggler raised."""
        task = asyncio.ensure_future(call)
        done, _ = await asyncio.wait({task, self.cutoff}, return_when=asyncio.FIRST_COMPLETED)
        if task in done:
            return task.result()
        task.cancel()
        raise Straggler(f"late: no answer {self.cutoff.result():.2f}s after the first of its round answered")

    def close(self) -> None:
        self.cutoff.cancel()
