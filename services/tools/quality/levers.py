"""Lever sweeps in one process: the services' own analyzer, BM25, embedder, feedback and fusion code,
without gRPC, so that a table over every collection and every lever takes minutes, not hours.

What differs from the gateway path is only plumbing: legs are searched exhaustively in memory
(bm25s and exact cosine, as the embedded engines do), and document embeddings are cached on disk
per (collection, embedder, text layout) so that fusion and BM25 levers cost no re-embedding.
The figures the issue asks for are confirmed through the gateway with `hybridsearch bench`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from pathlib import Path

import bm25s
import numpy as np
from ranx import Qrels, Run, evaluate

from hybridsearch.bm25.analyzer import EnglishAnalyzer
from hybridsearch.bm25.embedded import token_ids
from hybridsearch.text.chunking import chunk_text, indexed_text
from hybridsearch.corpus import beir_corpus_file, ignores_identical_ids, load_judged_queries, read_documents
from hybridsearch.expansion.prf import feedback_terms, prf_variants
from hybridsearch.expansion.signals import dominant_top_hit, strong_signal
from hybridsearch.fusion.methods import FusionParams, Item, QueryKind, Ranking, fuse
from hybridsearch.vector.embedder import EmbeddingCache, OnnxEmbedder
from hybridsearch.v1 import common_pb2

BM25, VECTOR = common_pb2.LEG_BM25, common_pb2.LEG_VECTOR
log = logging.getLogger(__name__)
METRICS = ("ndcg@10", "recall@100", "mrr@10")


@dataclass(frozen=True)
class Bm25Config:
    k1: float = 0.9
    b: float = 0.4
    stemmer: str = "porter"
    stopwords: str = "lucene"
    title_boost: float = 0.0  # adds title_boost x BM25(title field), as the engines' title field does


@dataclass(frozen=True)
class DenseConfig:
    embedder: str = "minilm-fp32"
    max_seq_length: int = 256
    with_title: bool = True
    chunk_words: int = 400  # passages per document; a document scores as its best passage


@dataclass(frozen=True)
class Setup:
    """One row of the lever table: which legs, how each is built, expansion, fusion."""

    legs: tuple[str, ...] = ("bm25", "vector")
    bm25: Bm25Config = Bm25Config()
    dense: DenseConfig = DenseConfig()
    depth: int = 100
    # Pseudo-relevance feedback as the expansion service does it (0 terms = off).
    prf_docs: int = 0
    prf_terms: int = 8
    # Rocchio on embeddings as the vector service does it (0 docs = off).
    rocchio_docs: int = 0
    rocchio_weight: float = 0.5
    fusion: FusionParams = field(default_factory=FusionParams)
    # Queries of at least this many words are fused with `long_fusion` instead (0 = off).
    long_query_words: int = 0
    long_fusion: FusionParams | None = None


@dataclass
class Dataset:
    name: str
    doc_ids: list[str]
    titles: list[str]
    texts: list[str]
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]
    ignore_identical: bool

    @classmethod
    def load(cls, folder: Path) -> Dataset:
        corpus = beir_corpus_file(folder)
        if corpus is None:
            raise FileNotFoundError(f"{folder} has no corpus.jsonl or corpus.jsonl.gz")
        docs, _ = read_documents(corpus)
        ids, titles, texts = [], [], []
        for d in docs:
            ids.append(d.id)
            titles.append(d.title)
            texts.append(d.text)
        queries, qrels = load_judged_queries(folder)
        return cls(folder.resolve().name, ids, titles, texts, queries, qrels, ignore_identical=ignores_identical_ids(folder))


Hits = list[tuple[str, float]]  # (doc_id, score), best first, one entry per document


def _best_per_doc(chunk_docs: list[str], order: np.ndarray, scores: np.ndarray, depth: int) -> Hits:
    seen: set[str] = set()
    out: Hits = []
    for i in order:
        d = chunk_docs[i]
        if d not in seen:
            seen.add(d)
            out.append((d, float(scores[i])))
            if len(out) == depth:
                break
    return out


def _top(scores: np.ndarray, k: int, matched_only: bool = False) -> np.ndarray:
    """Indexes of the k best scores, best first, ties in index order (as the engines break them)."""
    k = min(k, int(np.count_nonzero(scores)) if matched_only else len(scores))
    if k <= 0:
        return np.zeros(0, dtype=np.int64)
    top = np.argpartition(-scores, k - 1)[:k]
    return top[np.lexsort((top, -scores[top]))]


class LexicalLeg:
    """bm25s over the analyzed chunk texts, exactly as the embedded BM25 engine indexes them."""

    def __init__(self, ds: Dataset, cfg: Bm25Config, chunk_words: int = 400) -> None:
        self.ds, self.cfg = ds, cfg
        self.analyzer = EnglishAnalyzer(cfg.stemmer, cfg.stopwords)
        self.chunk_docs: list[str] = []
        self.chunk_text: list[str] = []
        tokens, title_tokens = [], []
        for doc_id, title, text in zip(ds.doc_ids, ds.titles, ds.texts):
            analyzed_title = self.analyzer.analyze(title)
            for piece in chunk_text(text, chunk_words, 40):
                self.chunk_docs.append(doc_id)
                self.chunk_text.append(f"{title} {piece.text}")
                tokens.append(self.analyzer.analyze(indexed_text(title, piece.heading, piece.text)))
                title_tokens.append(analyzed_title)
        self.index = bm25s.BM25(method="lucene", k1=cfg.k1, b=cfg.b)
        self.index.index(tokens, show_progress=False)
        # A title field per chunk, as the embedded engine and the OpenSearch index keep it.
        self.title_index = None
        if cfg.title_boost > 0 and any(title_tokens):  # a collection without titles (med) has no title field
            self.title_index = bm25s.BM25(method="lucene", k1=cfg.k1, b=cfg.b)
            self.title_index.index(title_tokens, show_progress=False)

    def search(self, query: str, depth: int) -> tuple[Hits, list[tuple[int, float]]]:
        """Best documents, and the best chunks as (chunk index, score) for feedback."""
        tokens = self.analyzer.analyze(query)
        ids = token_ids(self.index, tokens)
        if not ids:
            return [], []
        scores = self.index.get_scores(ids)
        if self.title_index is not None:
            title_ids = token_ids(self.title_index, tokens)
            if title_ids:
                scores = scores + self.cfg.title_boost * self.title_index.get_scores(title_ids)
        order = _top(scores, depth * 3, matched_only=True)
        return _best_per_doc(self.chunk_docs, order, scores, depth), [(int(i), float(scores[i])) for i in order[:10]]


class DenseLeg:
    """Exact cosine over cached chunk embeddings (Qdrant's local mode is exact too)."""

    def __init__(self, ds: Dataset, cfg: DenseConfig, cache_dir: Path) -> None:
        self.ds, self.cfg = ds, cfg
        self.embedder = OnnxEmbedder(cfg.embedder, cfg.max_seq_length)
        self.chunk_docs, texts = [], []
        for doc_id, title, text in zip(ds.doc_ids, ds.titles, ds.texts):
            for piece in chunk_text(text, cfg.chunk_words, min(40, cfg.chunk_words // 4)):
                self.chunk_docs.append(doc_id)
                texts.append(indexed_text(title if cfg.with_title else "", piece.heading, piece.text))
        # The vector service's own passage cache: what one side embedded, the other reuses.
        cached = EmbeddingCache(cache_dir / "embeddings.sqlite", self.embedder, cfg.max_seq_length)
        log.info("embedding %d passages of %s (%s)", len(texts), ds.name, cfg)
        self.matrix = cached.embed(texts)
        self._query_cache: dict[str, np.ndarray] = {}

    def query_vectors(self, texts: list[str]) -> np.ndarray:
        missing = [t for t in dict.fromkeys(texts) if t not in self._query_cache]
        if missing:
            for t, v in zip(missing, self.embedder.embed(missing)):
                self._query_cache[t] = v
        return np.stack([self._query_cache[t] for t in texts]) if texts else np.zeros((0, self.matrix.shape[1]))

    def search_vector(self, vector: np.ndarray, depth: int) -> tuple[Hits, np.ndarray]:
        scores = self.matrix @ vector
        order = _top(scores, depth * 3)
        return _best_per_doc(self.chunk_docs, order, scores, depth), order


class Levers:
    """Builds legs lazily and caches every leg run, so fusion levers re-use retrieval."""

    def __init__(self, ds: Dataset, cache_dir: Path) -> None:
        self.ds, self.cache_dir = ds, cache_dir
        self._lexical: dict[Bm25Config, LexicalLeg] = {}
        self._dense: dict[DenseConfig, DenseLeg] = {}
        self._runs: dict[tuple, dict[str, Hits]] = {}

    def lexical(self, cfg: Bm25Config) -> LexicalLeg:
        if cfg not in self._lexical:
            self._lexical[cfg] = LexicalLeg(self.ds, cfg)
        return self._lexical[cfg]

    def dense(self, cfg: DenseConfig) -> DenseLeg:
        if cfg not in self._dense:
            self._dense[cfg] = DenseLeg(self.ds, cfg, self.cache_dir)
        return self._dense[cfg]

    def bm25_run(self, cfg: Bm25Config, depth: int) -> dict[str, Hits]:
        key = ("bm25", cfg, depth)
        if key not in self._runs:
            leg = self.lexical(cfg)
            self._runs[key] = {q: leg.search(t, depth)[0] for q, t in self.ds.queries.items()}
        return self._runs[key]

    def dense_run(self, cfg: DenseConfig, depth: int, texts: dict[str, str] | None = None, tag: str = "q") -> dict[str, Hits]:
        key = ("dense", cfg, depth, tag)
        if key not in self._runs:
            leg = self.dense(cfg)
            texts = texts if texts is not None else self.ds.queries
            qids = list(texts)
            vectors = leg.query_vectors([texts[q] for q in qids])
            self._runs[key] = {q: leg.search_vector(v, depth)[0] for q, v in zip(qids, vectors)}
        return self._runs[key]

    def rocchio_run(self, cfg: DenseConfig, depth: int, n_docs: int, weight: float) -> dict[str, Hits]:
        key = ("rocchio", cfg, depth, n_docs, weight)
        if key not in self._runs:
            leg = self.dense(cfg)
            qids = list(self.ds.queries)
            vectors = leg.query_vectors([self.ds.queries[q] for q in qids])
            out = {}
            for q, v in zip(qids, vectors):
                _, order = leg.search_vector(v, n_docs)
                fb = v + weight * leg.matrix[order[:n_docs]].mean(axis=0)
                out[q] = leg.search_vector(fb / np.linalg.norm(fb), depth)[0]
            self._runs[key] = out
        return self._runs[key]

    def prf_variants(self, setup: Setup) -> tuple[dict[str, str], dict[str, str]]:
        """Lexical and semantic variants per query, as the expansion service builds them."""
        key = ("prf", setup.bm25, setup.prf_docs, setup.prf_terms)
        if key not in self._runs:
            leg = self.lexical(setup.bm25)
            lexical, semantic = {}, {}
            for q, text in self.ds.queries.items():
                if strong_signal(text):
                    continue
                _, chunks = leg.search(text, 10)
                if dominant_top_hit([s for _, s in chunks], 1.8, 8.0):
                    continue
                feedback = [(leg.chunk_text[i], score) for i, score in chunks[: setup.prf_docs]]
                terms = feedback_terms(text, feedback, leg.analyzer, setup.prf_terms)
                lex, sem = prf_variants(text, terms)
                if lex:
                    lexical[q], semantic[q] = lex[0], sem[0]
            self._runs[key] = (lexical, semantic)  # type: ignore[assignment]
        return self._runs[key]  # type: ignore[return-value]

    def rankings(self, setup: Setup) -> dict[str, list[Ranking]]:
        per_query: dict[str, list[Ranking]] = {q: [] for q in self.ds.queries}

        def add(run: dict[str, Hits], leg: int, kind: QueryKind) -> None:
            for q, hits in run.items():
                per_query[q].append(Ranking(leg, [Item(d, d, s) for d, s in hits], kind))

        if "bm25" in setup.legs:
            add(self.bm25_run(setup.bm25, setup.depth), BM25, QueryKind.ORIGINAL)
        if "vector" in setup.legs:
            add(self.dense_run(setup.dense, setup.depth), VECTOR, QueryKind.ORIGINAL)
            if setup.rocchio_docs:
                add(self.rocchio_run(setup.dense, setup.depth, setup.rocchio_docs, setup.rocchio_weight),
                    VECTOR, QueryKind.FEEDBACK)
        if setup.prf_docs:
            lexical, semantic = self.prf_variants(setup)
            if "bm25" in setup.legs and lexical:
                leg = self.lexical(setup.bm25)
                key = ("bm25-prf", setup.bm25, setup.prf_docs, setup.prf_terms, setup.depth)
                if key not in self._runs:
                    self._runs[key] = {q: leg.search(t, setup.depth)[0] for q, t in lexical.items()}
                add(self._runs[key], BM25, QueryKind.LEXICAL_VARIANT)
            if "vector" in setup.legs and semantic:
                tag = f"prf-{setup.bm25}-{setup.prf_docs}-{setup.prf_terms}"
                add(self.dense_run(setup.dense, setup.depth, semantic, tag), VECTOR, QueryKind.SEMANTIC_VARIANT)
        return per_query

    def evaluate(self, setup: Setup) -> dict[str, float]:
        run: dict[str, dict[str, float]] = {}
        for q, rankings in self.rankings(setup).items():
            params = setup.fusion
            if setup.long_query_words and len(self.ds.queries[q].split()) >= setup.long_query_words:
                params = setup.long_fusion or params
            fused = fuse(rankings, params, limit=100 + 1)
            ordered = [f.doc_id for f in fused if not (self.ds.ignore_identical and f.doc_id == q)][:100]
            run[q] = {d: float(len(ordered) - i) for i, d in enumerate(ordered)} or {"__no_hit__": 0.0}
        scores = evaluate(Qrels(self.ds.qrels), Run(run), list(METRICS))
        return {m: round(float(scores[m]), 4) for m in METRICS}


def variant(setup: Setup, **changes) -> Setup:
    """A copy of `setup` with nested fields changed: bm25__k1=1.2, fusion__rrf_k=20, depth=200. A mapping
    changes the entries it names: fusion__leg_weights={"bm25": 0.4} keeps the other legs' weights."""
    top: dict = {}
    nested: dict[str, dict] = {}
    for name, value in changes.items():
        if "__" in name:
            part, attr = name.split("__", 1)
            nested.setdefault(part, {})[attr] = value
        else:
            top[name] = value
    for part, attrs in nested.items():
        current = getattr(setup, part)
        attrs = {attr: {**getattr(current, attr), **value} if isinstance(value, dict) else value
                 for attr, value in attrs.items()}
        top[part] = replace(current, **attrs)
    return replace(setup, **top)
