"""Merged keys: a hit of one of several collections, keyed by its collection and chunk id (doc and chunk
ids may repeat between collections); a plain chunk id belongs to the search's primary collection."""

from __future__ import annotations

from collections.abc import Callable

SEP = "\x1f"  # between collection and chunk id in a merged key (no collection name or chunk id has it)


def key(collection: str, chunk_id: str) -> str:
    return f"{collection}{SEP}{chunk_id}"


def split_key(chunk_key: str, collection: str) -> tuple[str, str]:
    """(collection, chunk id) of a merged key; a plain chunk id belongs to `collection`."""
    if SEP in chunk_key:
        found, _, chunk_id = chunk_key.partition(SEP)
        return found, chunk_id
    return collection, chunk_key


def placed(plan, fused) -> Callable[[int], tuple[str, str]]:
    """(collection, chunk id) of fused hit i: several collections' merged keys split once, up front."""
    if not plan.parts:
        return lambda i: (plan.collection, fused[i].chunk_id)
    places = [split_key(f.chunk_id, plan.collection) for f in fused]
    return places.__getitem__
