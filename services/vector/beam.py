"""The search beam (HNSW `ef`) a collection is searched with, chosen from its size.

At a fixed beam, recall falls as the graph grows. Measured on static-minilm bench vectors, HNSW m 16,
ef_construct 100, 300 real queries against the exact scan (docs/performance.md §5.1): recall@10 at ef 128 is
0.978 at 100k points, 0.949 at 400k, 0.928 at 1M; the beam that brings it to 0.98 grows with the graph (400k:
ef 512 gives 0.983; 1M: 768 gives 0.980, 1024 gives 0.985). A beam costs search time roughly in proportion,
so each size gets the smallest beam measured to hold 0.98, not the largest.
"""

from __future__ import annotations

import math

# (points up to, beam): the first row whose bound holds the collection's points; 0: hnsw_ef itself (128 by
# default). Rows to 1.2M follow the measurements above; the two beyond are extrapolated (one step per
# doubling), not measured.
EF_BY_SIZE: tuple[tuple[float, int], ...] = (
    (150_000, 0),
    (300_000, 256),
    (600_000, 512),
    (1_200_000, 768),
    (2_500_000, 1024),
    (math.inf, 1536),
)
REFRESH_S = 30.0  # how long a collection's size is trusted before it is read again


def search_ef(points: int, floor: int) -> int:
    """The beam for a collection of `points` points: its size's row, never under `floor` (hnsw_ef)."""
    return max(floor, next(ef for bound, ef in EF_BY_SIZE if points <= bound))
