"""The garbage collector kept off the answers' tail.

A full collection walks every object the collector tracks, and a service holds ~280k of them before its first
answer (its imports, its settings, its stubs): a full collection of the gateway's heap took 141 ms here, an answer
stalled behind it on every request in flight. Frozen once the service serves (gc.freeze: the collector leaves them
alone; refcounting still frees them), a full collection walks only what came after: 2.8 ms
(docs/performance.md, issue 35: docs/perf/gc-pause.py).
"""

from __future__ import annotations

import gc


def freeze_startup_heap() -> int:
    """Collects once, then freezes what is left (the service's set-up): how many objects were frozen."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()
