"""Scale corpora (100k, 1M passages) for the embedded engines: real text first, then generated text
whose term statistics follow the real text's.

Real text, every unique passage of:
  - ../shared/training (SQuAD/WikiQA/TrecQA paragraphs, SQuAD dev and MS MARCO dev passages);
  - every collection in ../shared/datasets (titles and texts).
That is about 51k passages. The rest is generated, deterministically from a seed:
  - length: drawn from the real passages' word counts, clipped to [MIN_WORDS, MAX_WORDS] (passages, not
    documents: the scale runs measure the engines, and one chunk a passage keeps embedding affordable);
  - words: each generated passage takes a real passage as its topic; every next word is, with
    probability TOPIC_SHARE, a word of that topic passage (so a topic's words recur inside a passage, the
    burstiness BM25's tf saturation and document frequencies depend on), and otherwise the successor of
    the previous word drawn from the bigram counts of the whole real text (falling back to the unigram
    distribution), which keeps the global Zipf distribution of the real text and a local word order an
    embedding model reads as text.
Vectors are real embeddings of that text, computed once (`hybridsearch scale-corpus --embed`) into the
vector service's embedding cache, in slices, so an interrupted run keeps what it finished: MiniLM's
(~60 passages/s here), or with `--embedder static-minilm` a model2vec model distilled from MiniLM
(vector/static.py; thousands a second, bench vectors only, labelled as such wherever they are reported).
"""

from __future__ import annotations

import gzip
import json
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from hybridsearch.text.chunking import indexed_text
from hybridsearch.corpus import beir_corpus_file, read_beir_corpus
from hybridsearch.vector.embedder import EmbeddingCache

MIN_WORDS, MAX_WORDS = 16, 64
TOPIC_SHARE = 0.45
WORD = re.compile(r"\S+")


@dataclass(frozen=True)
class Passage:
    pid: str
    title: str
    text: str

    def to_json(self) -> str:
        return json.dumps({"_id": self.pid, "title": self.title, "text": self.text}, ensure_ascii=False)


def real_passages(shared: Path) -> list[Passage]:
    """Every unique passage of ../shared/training and ../shared/datasets, in a fixed order."""
    seen: set[str] = set()
    out: list[Passage] = []

    def add(pid: str, title: str, text: str) -> None:
        key = text.strip()
        if key and key not in seen:
            seen.add(key)
            out.append(Passage(pid, title, key))

    with gzip.open(shared / "training" / "triples.tsv.gz", "rt", encoding="utf-8") as f:
        for i, line in enumerate(f):
            _, positive, negative = line.rstrip("\n").split("\t")[:3]
            add(f"train-{i}-p", "", positive)
            add(f"train-{i}-n", "", negative)
    with gzip.open(shared / "training" / "heldout_pairs.tsv.gz", "rt", encoding="utf-8") as f:
        next(f)
        for i, line in enumerate(f):
            add(f"heldout-{i}", "", line.split("\t")[1])
    for folder in sorted(p for p in (shared / "datasets").iterdir() if p.is_dir()):
        corpus = beir_corpus_file(folder)
        if corpus is not None:
            for doc in read_beir_corpus(corpus):
                add(f"{folder.name}-{doc.id}", doc.title, doc.text)
    return out


class TextModel:
    """Unigram and bigram counts of the real passages, as arrays, for sampling."""

    def __init__(self, passages: list[Passage]) -> None:
        vocab: dict[str, int] = {}
        self.docs: list[np.ndarray] = []
        for p in passages:
            ids = [vocab.setdefault(w, len(vocab)) for w in WORD.findall(p.text)]
            self.docs.append(np.asarray(ids, dtype=np.int32))
        self.words = np.array(list(vocab), dtype=object)
        tokens = np.concatenate([d for d in self.docs if len(d)])
        self.unigram = np.bincount(tokens, minlength=len(vocab)).astype(np.float64)
        self.unigram_cdf = np.cumsum(self.unigram) / self.unigram.sum()
        # Bigrams as CSR: successors of word w are succ[start[w]:start[w+1]] with cumulative weights.
        pairs = np.concatenate([np.stack([d[:-1], d[1:]], axis=1) for d in self.docs if len(d) > 1])
        keys = pairs[:, 0].astype(np.int64) * len(vocab) + pairs[:, 1]
        unique, counts = np.unique(keys, return_counts=True)
        first, self.succ = unique // len(vocab), (unique % len(vocab)).astype(np.int32)
        self.start = np.searchsorted(first, np.arange(len(vocab) + 1))
        self.succ_cdf = np.empty(len(counts), dtype=np.float64)
        for w in np.flatnonzero(np.diff(self.start)):  # cumulative weights within each word's block
            block = counts[self.start[w]:self.start[w + 1]].astype(np.float64)
            self.succ_cdf[self.start[w]:self.start[w + 1]] = np.cumsum(block) / block.sum()
        self.lengths = np.array([len(d) for d in self.docs if len(d)], dtype=np.int32)

    def _next(self, rng: np.random.Generator, previous: int) -> int:
        lo, hi = self.start[previous], self.start[previous + 1]
        if hi > lo:
            return int(self.succ[lo + np.searchsorted(self.succ_cdf[lo:hi], rng.random())])
        return int(np.searchsorted(self.unigram_cdf, rng.random()))

    def passage(self, rng: np.random.Generator) -> str:
        topic = self.docs[int(rng.integers(len(self.docs)))]
        while len(topic) == 0:
            topic = self.docs[int(rng.integers(len(self.docs)))]
        length = int(np.clip(self.lengths[int(rng.integers(len(self.lengths)))], MIN_WORDS, MAX_WORDS))
        words = [int(topic[int(rng.integers(len(topic)))])]
        for _ in range(length - 1):
            if rng.random() < TOPIC_SHARE:
                words.append(int(topic[int(rng.integers(len(topic)))]))
            else:
                words.append(self._next(rng, words[-1]))
        return " ".join(self.words[words])


def clipped(passage: Passage) -> Passage:
    """Real passages keep their first MAX_WORDS words: one chunk each, like the generated ones."""
    words = passage.text.split()
    return passage if len(words) <= MAX_WORDS else Passage(passage.pid, passage.title, " ".join(words[:MAX_WORDS]))


def scale_passages(shared: Path, size: int, seed: int = 15) -> Iterator[Passage]:
    """`size` passages: the real ones first (clipped), then generated ones."""
    real = real_passages(shared)
    for p in real[:size]:
        yield clipped(p)
    if size <= len(real):
        return
    model = TextModel(real)
    rng = np.random.default_rng(seed)
    for i in range(size - len(real)):
        yield Passage(f"gen-{i}", "", model.passage(rng))


def write_corpus(shared: Path, size: int, out: Path, seed: int = 15) -> Path:
    """A BEIR-style corpus.jsonl.gz of `size` passages (written atomically; reused when it exists)."""
    path = out / f"scale-{size}" / "corpus.jsonl.gz"
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    with gzip.open(tmp, "wt", encoding="utf-8", compresslevel=3) as f:
        for p in scale_passages(shared, size, seed):
            f.write(p.to_json() + "\n")
    tmp.replace(path)
    return path


def embedding_log(corpus: Path, embedder: str) -> Path:
    """Where an embedder's one-off cost for a corpus is kept (MiniLM's kept its first name, embedding.json)."""
    return corpus.parent / ("embedding.json" if embedder == "minilm-fp32" else f"embedding-{embedder}.json")


def embed_corpus(corpus: Path, cache: EmbeddingCache, slice_size: int = 4096, progress=None) -> dict:
    """Fills the embedding cache with every passage's vector (what the vector service will embed: the
    indexed text of its one chunk), by the cache's embedder. Resumable: cached passages cost a lookup.
    Adds this run's embedding time to embedding_log(corpus, embedder), so the one-off cost is known after
    several sessions."""
    log_path = embedding_log(corpus, cache.name)
    record = (json.loads(log_path.read_text()) if log_path.exists()
              else {"embedder": cache.name, "dim": cache.dim, "seconds": 0.0, "embedded": 0})
    texts: list[str] = []

    def flush() -> None:
        started = time.perf_counter()
        before = cache.misses
        cache.embed(texts)
        if cache.misses > before:
            record["seconds"] = round(record["seconds"] + time.perf_counter() - started, 1)
            record["embedded"] += cache.misses - before
            record["passages_per_s"] = round(record["embedded"] / max(record["seconds"], 0.1), 1)
            log_path.write_text(json.dumps(record, indent=2))
        if progress:
            progress(len(texts))
        texts.clear()

    for doc in read_beir_corpus(corpus):
        texts.append(indexed_text(doc.title, "", doc.text.strip()))
        if len(texts) >= slice_size:
            flush()
    if texts:
        flush()
    return record
