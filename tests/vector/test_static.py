"""static-minilm: the model2vec model distilled from MiniLM by `hybridsearch export-models --embedder
static-minilm` (bench vectors for the scale figures, vector/static.py), through the embedder registry."""

from __future__ import annotations

import numpy as np

from hybridsearch.config.settings import Settings
from hybridsearch.vector import static
from hybridsearch.vector.e5 import Role
from hybridsearch.vector.embedder import EMBEDDERS, QueryEncoder, open_embedder

TEXTS = [
    "Aspirin lowers the risk of a first myocardial infarction in adults with diabetes.",
    "Heart attacks in diabetic patients are less frequent with daily aspirin.",
    "The galaxy's spiral arms hold young, bright stars.",
    "short",
]


def test_static_embedder_gives_256_dimensional_unit_vectors_of_the_text():
    embedder = open_embedder(static.NAME)
    vectors = embedder.embed(TEXTS)
    assert static.NAME in EMBEDDERS and embedder.dim == static.DIMENSIONS == 256
    assert vectors.shape == (len(TEXTS), 256) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    # Real embeddings of the text, not noise: the paraphrase is nearer than the unrelated sentence, and a
    # text's vector does not depend on its neighbours in the batch.
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2] + 0.2
    np.testing.assert_allclose(embedder.embed(TEXTS[2:3])[0], vectors[2], atol=1e-6)
    assert embedder.embed([]).shape == (0, 256)


async def test_queries_and_passages_share_one_space_with_minilms_normaliser():
    encoder = QueryEncoder(static.NAME, 256)
    try:
        (query,) = await encoder.embed([TEXTS[0]])
    finally:
        encoder.close()
    np.testing.assert_allclose(query, open_embedder(static.NAME, role=Role.PASSAGE).embed(TEXTS[:1])[0], atol=1e-6)
    assert encoder.dim == 256 and "BertNormalizer" in encoder.identity  # uncased: "Aspirin" and "aspirin" share a key
    assert encoder.normalise("  ASPIRIN   Trial ") == "aspirin trial"


def test_settings_take_it_as_an_operator_choice():
    assert Settings(vector={"embedder": static.NAME}).vector.embedder == static.NAME
