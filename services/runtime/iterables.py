"""Small iteration helpers shared by the client and the engine adapters."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import islice
from typing import TypeVar

T = TypeVar("T")


def batched(items: Iterable[T], size: int) -> Iterator[list[T]]:
    """Lists of `size` items, the last one shorter (itertools.batched needs Python 3.12)."""
    it = iter(items)
    while batch := list(islice(it, size)):
        yield batch
