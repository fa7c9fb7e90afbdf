"""The in-process baseline every speed figure is a ratio to: a one-process library of the CodeRAG kind.

bm25s (Snowball English stemmer, English stopwords, k1 1.5, b 0.75) and all-MiniLM-L6-v2 exact cosine,
each leg fetching 2,000, fused by reciprocal rank fusion (k 60), one thread, no network, no process
boundary. It is what a team would write in an afternoon instead of deploying services; our gateway has
to beat it while crossing real gRPC hops.

Document vectors come from the vector service's embedding cache where it has them (the same MiniLM,
the same text), so building the baseline costs no re-embedding of an indexed collection; the query is
embedded fresh on one onnxruntime thread, as the library would.

Its CPU per query is the calling thread's CPU time (`time.thread_time`) around each search: everything the
baseline does runs on that thread (bm25s with n_threads=1, onnxruntime with one intra-op thread, BLAS
limited to one thread), while the process it shares with the measuring tool has other threads (gRPC's,
a progress bar's). The process CPU over the same calls is kept beside it as a check.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import bm25s
import numpy as np
from threadpoolctl import threadpool_limits
import Stemmer

from hybridsearch.text.chunking import indexed_text
from hybridsearch.vector.embedder import EmbeddingCache, OnnxEmbedder

LEG_DEPTH = 2000
RRF_K = 60.0
K1, B = 1.5, 0.75


@dataclass(frozen=True)
class BaselineDocument:
    doc_id: str
    title: str
    text: str

    @property
    def indexed(self) -> str:
        return indexed_text(self.title, "", self.text)


@dataclass(frozen=True)
class BaselineCall:
    """One search measured: its hits, wall milliseconds, and CPU milliseconds of the calling thread (all of
    it, and the query embedding's part), and of the whole process over the same call."""

    hits: list[str]
    wall_ms: float
    thread_cpu_ms: float
    embed_cpu_ms: float
    process_cpu_ms: float


class LibraryBaseline:
    """bm25s + exact cosine + RRF in one thread; `search()` is the whole query path."""

    embed_cpu_ns: int = 0  # thread CPU spent embedding queries so far (each instance counts its own)

    def __init__(self, documents: list[BaselineDocument], vectors: np.ndarray, embedder: OnnxEmbedder) -> None:
        if len(documents) != len(vectors):
            raise ValueError("one vector per document")
        self.ids = [d.doc_id for d in documents]
        self.stemmer = Stemmer.Stemmer("english")
        self.bm25 = bm25s.BM25(k1=K1, b=B)
        corpus_tokens = bm25s.tokenize([d.indexed for d in documents], stopwords="en", stemmer=self.stemmer,
                                       show_progress=False)
        self.bm25.index(corpus_tokens, show_progress=False)
        self.vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        self.embedder = embedder

    @classmethod
    def build(cls, documents: list[BaselineDocument], cache_path: Path, embedder_name: str = "minilm-fp32",
              max_seq_length: int = 256) -> LibraryBaseline:
        """Query embedder on one thread; document vectors through the shared on-disk cache.

        BLAS is limited to one thread for the whole process: OpenBLAS otherwise runs the cosine product on
        every core and its threads busy-wait after it, taking the cores from the services measured next
        (it made the gateway's own time 8 ms longer in the interleaved BALANCED column on SciFact).
        """
        threadpool_limits(1, user_api="blas")
        embedder = OnnxEmbedder(embedder_name, max_seq_length, threads=1)
        cached = EmbeddingCache(cache_path, OnnxEmbedder(embedder_name, max_seq_length), max_seq_length)
        return cls(documents, cached.embed([d.indexed for d in documents]), embedder)

    def _bm25_ranks(self, query: str, depth: int) -> np.ndarray:
        tokens = bm25s.tokenize([query], stopwords="en", stemmer=self.stemmer, show_progress=False, return_ids=False)
        docs, scores = self.bm25.retrieve(tokens, k=min(depth, len(self.ids)), show_progress=False, n_threads=1)
        return docs[0][scores[0] > 0]

    def _dense_ranks(self, query: str, depth: int) -> np.ndarray:
        started = time.thread_time_ns()
        q = self.embedder.embed([query])[0]
        self.embed_cpu_ns += time.thread_time_ns() - started
        scores = self.vectors @ q
        k = min(depth, len(scores))
        top = np.argpartition(-scores, k - 1)[:k]
        return top[np.argsort(-scores[top], kind="stable")]

    def search(self, query: str, top_k: int = 10, depth: int = LEG_DEPTH) -> list[str]:
        """RRF over both legs in numpy: a fair library, not a strawman with a Python loop per hit."""
        fused = np.zeros(len(self.ids), dtype=np.float64)
        for ranks in (self._bm25_ranks(query, depth), self._dense_ranks(query, depth)):
            fused[ranks] += 1.0 / (RRF_K + np.arange(1, len(ranks) + 1))
        k = min(top_k, int(np.count_nonzero(fused)))
        if k == 0:
            return []
        best = np.argpartition(-fused, k - 1)[:k]
        return [self.ids[d] for d in best[np.argsort(-fused[best], kind="stable")]]

    def measured_search(self, query: str, top_k: int = 10) -> BaselineCall:
        """The search with its wall time and CPU time (thread, embedding, process): see the module's doc."""
        embed, process, thread = self.embed_cpu_ns, time.process_time_ns(), time.thread_time_ns()
        start = time.perf_counter()
        hits = self.search(query, top_k)
        wall = time.perf_counter() - start
        thread, process = time.thread_time_ns() - thread, time.process_time_ns() - process
        return BaselineCall(hits, wall * 1000, thread / 1e6, (self.embed_cpu_ns - embed) / 1e6, process / 1e6)
