"""Which leg hits travel with their text, and the few texts the answer needs that did not.

A leg answers `leg_depth` (100) hits a list; fusion reads only their ids, ranks and scores. Texts are for
the page's previews and the reranker's pool, and they are most of a leg's answer (100 SciFact hits: 161 KB,
nine bytes in ten of it text), serialised by the leg, carried over the hop and parsed by the gateway for
hits nobody will see. So a search asks its legs for texts down to `text_depth` only
(gateway.query.rerank_policy): twice what its page and its rerank pool can reach, so the hits fused into the
answer almost always brought their own. The
rest (a hit ranked deep in every list, a page far down, hits pushed up by boosts or min_score) are read
from the store afterwards, in one GetChunks call per store, only for the hits that are shown or reranked.

Several collections in one query keep every text: fan-out deduplicates their hits by content.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import grpc

from hybridsearch.config.search import QuerySettings, RerankSettings
from hybridsearch.security.sealing import Sealer
from hybridsearch.contract.errors import Refusal
from hybridsearch.gateway.backends import Backends
from hybridsearch.gateway.query.deadline import Deadline
from hybridsearch.gateway.query.rerank_policy import text_depth
from hybridsearch.gateway.query.keys import split_key
from hybridsearch.gateway.query.sealed import open_hits
from hybridsearch.v1 import common_pb2

class StoredTexts:
    """Chunks read back from the stores: the vector leg's own passages ("#p<n>") from the vector store,
    every other chunk from the BM25 store; one GetChunks call per (collection, store)."""

    def __init__(self, cfg: QuerySettings, rerank: RerankSettings, sealer: Sealer, backends: Backends) -> None:
        self.cfg, self.rerank, self.backends = cfg, rerank, backends
        self.sealer = sealer  # a sealed collection's chunks are opened as they are read (gateway.query.sealed)

    async def chunks(self, hits: list[tuple[str, str, str]], deadline: Deadline,
                     stored: Callable[[str], str] = str) -> dict[tuple[str, str], common_pb2.Chunk]:
        """The stored chunks of these (collection, doc id, chunk id) by (collection, chunk id); `stored` names the
        store name of a collection (an alias's serving generation: SearchPlan.stored_of). Refusal when a store
        cannot answer."""
        wanted: dict[tuple[str, bool], set[str]] = {}
        for collection, doc_id, chunk_id in hits:
            passage = chunk_id.rpartition("#")[2].startswith("p")
            wanted.setdefault((collection, passage), set()).add(doc_id)
        stubs = {True: self.backends.vector, False: self.backends.bm25}
        places = list(wanted)
        calls = [stubs[passage].GetChunks(common_pb2.GetChunksRequest(collection=stored(c), doc_ids=sorted(wanted[c, passage])),
                                          timeout=deadline.left())
                 for c, passage in places]
        try:
            answers = await asyncio.gather(*calls)
        except grpc.aio.AioRpcError as err:
            raise Refusal(f"the page's texts could not be read ({err.code().name}: {err.details()}); retry") from err
        seals = {c: self.sealer.of(c) for c, _ in places}
        return {(c, chunk.chunk_id): seals[c].open_chunk(chunk) if seals[c] else chunk
                for (c, _), answer in zip(places, answers) for chunk in answer.chunks}

    async def fill(self, plan, hits, pool, deadline: Deadline, report) -> list[common_pb2.LegHit]:
        """Reads the texts of these fused hits that came from below the legs' text depth into `pool`, and opens
        the sealed ones (gateway.query.sealed); one that cannot be read leaves its hit without a preview, noted.
        The hits as the page shows them (Pool.shown: a sealed one's metadata opened)."""
        open_hits(plan, hits, pool)
        if text_depth(plan, self.cfg, self.rerank):  # 0: every hit came with its text
            await self._read(plan, [h for h in hits if not pool.hit(h.chunk_id).text], pool, deadline, report)
        sealed = {c for c, _ in plan.configs if plan.plan_of(c).seal is not None}
        return [pool.shown(h.chunk_id, bool(sealed) and split_key(h.chunk_id, plan.collection)[0] in sealed) for h in hits]

    async def _read(self, plan, missing, pool, deadline: Deadline, report) -> None:
        if not missing:
            return
        t = time.perf_counter()
        try:
            chunks = await self.chunks([(plan.collection, h.doc_id, h.chunk_id) for h in missing], deadline, plan.stored_of)
        except Refusal as err:
            report.notices.append(f"texts of {len(missing)} hits not shown: {err}")
            return
        for h in missing:
            if (chunk := chunks.get((plan.collection, h.chunk_id))) is not None:
                (pool.open if plan.seal else pool.fill)(h.chunk_id, chunk)
        report.timed("texts", t)
