"""The ranked lists one search works on, and the texts they brought.

Fused hits travel without text (the fusion service reads ids, ranks and scores only): the gateway keeps
each chunk's title, text and metadata from the first list that carried it, and reads the few the answer
needs that came from below the legs' text depth from the stores (gateway.query.texts). With several
collections each collection has its own Pool, and gateway.query.fanout.MergedPool answers for the merged keys.
"""

from __future__ import annotations

from collections.abc import Iterable

from hybridsearch.v1 import common_pb2

EXPLAINED_HITS = 20  # hits of each list an explanation shows


class Pool:
    def __init__(self) -> None:
        self.lists: list[common_pb2.RankedList] = []
        self._hits: dict[str, common_pb2.LegHit] = {}
        self._opened: dict[str, dict[str, str]] = {}  # sealed hits opened for the answer: their clear metadata

    def add(self, lists: Iterable[common_pb2.RankedList]) -> None:
        for rl in lists:
            self.lists.append(rl)
            for h in rl.hits:  # the first that came with its text (gateway.query.texts: lists trim theirs)
                known = self._hits.get(h.chunk_id)
                if known is None or (h.text and not known.text):
                    if known is not None and not h.HasField("span") and known.HasField("span"):
                        h.span.CopyFrom(known.span)  # an engine that keeps no spans (bm25s) beside one that does
                    self._hits[h.chunk_id] = h
                elif h.HasField("span") and not known.HasField("span"):
                    known.span.CopyFrom(h.span)

    def hit(self, chunk_id: str) -> common_pb2.LegHit:
        """The leg hit (title, text, metadata) of a chunk; an empty one for a chunk no list brought."""
        return self._hits.get(chunk_id) or common_pb2.LegHit()

    def fill(self, chunk_id: str, chunk: common_pb2.Chunk) -> None:
        """A text read from the store for a chunk whose lists carried none."""
        hit = self._hits.setdefault(chunk_id, common_pb2.LegHit(chunk_id=chunk_id))
        hit.title, hit.text = chunk.title, chunk.text
        if chunk.HasField("span"):
            hit.span.CopyFrom(chunk.span)
        for key, value in chunk.metadata.items():  # what the page shows of it (its metadata, its path)
            hit.metadata.setdefault(key, value)

    def open(self, chunk_id: str, content: common_pb2.Chunk) -> None:
        """A sealed hit opened for the answer (gateway.query.sealed): its clear title and text in place of the sealed
        record (and the stored chunk's span, when read from the store); its metadata stays hashed (boosts match
        hashes), the clear one kept apart for what the page shows (`shown`)."""
        hit = self._hits.setdefault(chunk_id, common_pb2.LegHit(chunk_id=chunk_id))
        hit.title, hit.text = content.title, content.text
        hit.ClearField("sealed")
        if content.HasField("span"):
            hit.span.CopyFrom(content.span)
        self._opened[chunk_id] = dict(content.metadata)

    def shown(self, chunk_id: str, sealed: bool = False) -> common_pb2.LegHit:
        """A hit as the page shows it (its text, metadata, path, tags): a sealed collection's with its opened
        metadata, none when it could not be opened (a keyed hash is nothing to show)."""
        hit = self.hit(chunk_id)
        if not sealed and chunk_id not in self._opened:
            return hit
        out = common_pb2.LegHit()
        out.CopyFrom(hit)
        out.metadata.clear()
        out.metadata.update(self._opened.get(chunk_id, {}))
        return out

    def lists_of(self, collection: str) -> list[common_pb2.RankedList]:
        """The lists a collection's hits were fused from (the calibration's scale)."""
        return self.lists

    def explained(self) -> list[common_pb2.RankedList]:
        return [trimmed(rl) for rl in self.lists]


def trimmed(rl: common_pb2.RankedList, suffix: str = "") -> common_pb2.RankedList:
    """A list as explain shows it: its first EXPLAINED_HITS hits, ids and scores only."""
    out = common_pb2.RankedList(leg=rl.leg, kind=rl.kind, query=rl.query + suffix, weight=rl.weight)
    out.hits.extend(common_pb2.LegHit(chunk_id=h.chunk_id, doc_id=h.doc_id, score=h.score, rank=h.rank)
                    for h in rl.hits[:EXPLAINED_HITS])
    return out
