"""scale-corpus's vectors: `--embed --embedder static-minilm` fills the embedding cache the vector service
reads (same keys, same vectors), resumably, and records the one-off cost per embedder."""

from __future__ import annotations

import gzip
import json

import numpy as np
from typer.testing import CliRunner

from hybridsearch.cli import app
from hybridsearch.text.chunking import indexed_text
from hybridsearch.tools.perf.scale import Passage, embedding_log
from hybridsearch.vector import static
from hybridsearch.vector.embedder import EmbeddingCache, open_embedder

PASSAGES = [Passage(f"p{i}", "Title" if i % 3 == 0 else "", f"passage {i} about {topic} and its measured effects")
            for i, topic in enumerate(["aspirin", "galaxies", "tantivy segments", "river deltas", "protein folding"] * 4)]


def test_scale_corpus_embeds_with_the_chosen_embedder(tmp_path):
    out, data = tmp_path / "scale", tmp_path / "data"
    corpus = out / f"scale-{len(PASSAGES)}" / "corpus.jsonl.gz"
    corpus.parent.mkdir(parents=True)
    with gzip.open(corpus, "wt") as f:  # an existing corpus is reused, so no ../shared is read here
        f.write("".join(p.to_json() + "\n" for p in PASSAGES))
    args = ["scale-corpus", "--size", str(len(PASSAGES)), "--out", str(out), "--embed", "--data-dir", str(data),
            "--embedder", static.NAME]

    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    record = json.loads(embedding_log(corpus, static.NAME).read_text())
    assert (record["embedder"], record["dim"], record["embedded"]) == (static.NAME, 256, len(PASSAGES))
    assert not (corpus.parent / "embedding.json").exists()  # MiniLM's record is not touched

    # The cache holds what the vector service (vector.embedder=static-minilm) would compute for each chunk.
    embedder = open_embedder(static.NAME)
    texts = [indexed_text(p.title, "", p.text) for p in PASSAGES]
    cache = EmbeddingCache(data / "cache" / "embeddings.sqlite", embedder, 256)
    np.testing.assert_allclose(cache.embed(texts), embedder.embed(texts), atol=1e-6)
    assert cache.misses == 0 and cache._db.execute("SELECT COUNT(*) FROM vectors").fetchone()[0] == len(PASSAGES)

    again = CliRunner().invoke(app, args)  # resumable: a second run finds every vector cached
    assert again.exit_code == 0, again.output
    assert json.loads(embedding_log(corpus, static.NAME).read_text())["embedded"] == len(PASSAGES)


def test_scale_corpus_refuses_an_unknown_embedder(tmp_path):
    result = CliRunner().invoke(app, ["scale-corpus", "--size", "5", "--out", str(tmp_path), "--embedder", "word2vec"])
    assert result.exit_code == 2 and "static-minilm" in result.output
