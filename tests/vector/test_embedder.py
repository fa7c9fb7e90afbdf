"""The ONNX embedders against the reference computation (transformers + sentence-transformers' mean
pooling and L2 norm) on the same packaged weights, and the passage cache that sits in front of them."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from hybridsearch.config.settings import Settings
from hybridsearch.vector.embedder import EmbeddingCache, OnnxEmbedder, QueryEncoder, encoder_source

TEXTS = [
    "Aspirin lowers the risk of a first myocardial infarction in adults with diabetes: a randomised trial.",
    "short",
    "Boundary layer transition on a flat plate at hypersonic speeds " * 12,  # past 128 tokens: padding matters
    "",
]


def reference_vectors(name: str, texts: list[str], max_length: int) -> np.ndarray:
    import torch
    from transformers import AutoModel, AutoTokenizer

    source = encoder_source(name)
    tokenizer, model = AutoTokenizer.from_pretrained(str(source)), AutoModel.from_pretrained(str(source)).eval()
    batch = tokenizer(texts, padding=True, truncation=True, max_length=max_length, return_tensors="pt")
    with torch.no_grad():
        hidden = model(**batch).last_hidden_state
    mask = batch["attention_mask"][..., None].float()
    pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
    return torch.nn.functional.normalize(pooled, dim=1).numpy()


@pytest.mark.parametrize("name, dim", [("minilm-fp32", 384), ("mpnet-fp32", 768)])
def test_onnx_export_matches_the_reference(name, dim):
    embedder = OnnxEmbedder(name, max_seq_length=128, batch_size=2)  # two batches, different padded lengths
    vectors = embedder.embed(TEXTS)
    assert embedder.dim == dim and vectors.shape == (len(TEXTS), dim)
    np.testing.assert_allclose(vectors, reference_vectors(name, TEXTS, 128), atol=2e-5)
    assert embedder.embed([]).shape == (0, dim)


def test_the_batch_size_changes_no_vector():
    """vector.batch_size is a speed setting only (small batches pad less: config.py): a text's vector is the
    same bits whether it is embedded alone or padded beside longer texts in any batch."""
    texts = [*TEXTS, " ".join(TEXTS), "a"]
    alone = np.concatenate([OnnxEmbedder("minilm-fp32", 256, batch_size=1).embed([t]) for t in texts])
    for size in (2, 4, 32):
        np.testing.assert_array_equal(OnnxEmbedder("minilm-fp32", 256, batch_size=size).embed(texts), alone)


def test_passage_cache_returns_what_the_model_computes(tmp_path):
    embedder = OnnxEmbedder("minilm-fp32", max_seq_length=128)
    cache = EmbeddingCache(tmp_path / "embeddings.sqlite", embedder, 128)
    cache.WRITE_EVERY = 2  # several write slices
    first = cache.embed(TEXTS)
    np.testing.assert_allclose(first, embedder.embed(TEXTS), atol=1e-6)
    # A second cache on the same file (another process, say) reads every vector back, in input order.
    again = EmbeddingCache(tmp_path / "embeddings.sqlite", embedder, 128)
    rows = again._db.execute("SELECT COUNT(*) FROM vectors").fetchone()[0]
    assert rows == len(set(TEXTS))
    np.testing.assert_array_equal(again.embed(TEXTS[::-1]), first[::-1])


def test_unknown_embedder_is_refused():
    from hybridsearch.runtime.models import ModelUnavailable

    with pytest.raises(ModelUnavailable, match="choose one of minilm-fp32, minilm-int8, mpnet-fp32"):
        OnnxEmbedder("e5-large")


def test_settings_refuse_an_unknown_embedder():
    with pytest.raises(ValidationError, match="mpnet-fp32"):
        Settings(vector={"embedder": "e5-large"})


async def test_query_encoder_runs_queries_side_by_side_with_the_same_vectors():
    import asyncio

    encoder = QueryEncoder("minilm-fp32", 128)
    reference = OnnxEmbedder("minilm-fp32", max_seq_length=128)
    try:
        together = await asyncio.gather(*(encoder.embed([t]) for t in TEXTS))
    finally:
        encoder.close()
    np.testing.assert_allclose(np.vstack(together), reference.embed(TEXTS), atol=1e-5)
