"""The search beam follows the collection's size (vector/beam.py): the measured rows, never under hnsw_ef, and
what a store searches and reports with."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hybridsearch.config.stores import VectorSettings
from hybridsearch.tools.perf.edge_bench import chunks_for
from hybridsearch.vector import beam, store as store_module
from hybridsearch.vector.beam import EF_BY_SIZE, search_ef
from hybridsearch.vector.edge import EdgeStore
from hybridsearch.vector.points import search_params


@pytest.mark.parametrize("points,ef", [(0, 128), (5_183, 128), (100_000, 128), (150_001, 256), (400_000, 512),
                                       (1_000_000, 768), (2_000_000, 1024), (50_000_000, 1536)])
def test_the_beam_of_each_measured_size(points, ef):
    assert search_ef(points, 128) == ef
    assert search_ef(points, 64) == (64 if ef == 128 else ef)  # a smaller hnsw_ef holds where no row grows it


def test_the_beam_never_shrinks_as_a_collection_grows_and_never_goes_under_hnsw_ef():
    beams = [search_ef(n, 128) for n in range(0, 3_000_000, 10_000)]
    assert beams == sorted(beams) and EF_BY_SIZE[-1][0] == math.inf
    assert search_ef(1_000_000, 2000) == 2000
    assert search_params(VectorSettings(), 1_000_000).hnsw_ef == 768  # recall@10 0.980 at 1M (§5.1)
    assert search_params(VectorSettings(hnsw_ef_by_size=False), 1_000_000).hnsw_ef == 128
    assert search_params(VectorSettings(hnsw_ef=0), 1_000_000).hnsw_ef is None  # the server's default


async def test_a_store_searches_a_collection_with_its_size_beam_and_says_so(tmp_path, monkeypatch):
    monkeypatch.setattr(beam, "EF_BY_SIZE", ((100, 0), (math.inf, 300)))  # 150 points: the second row
    monkeypatch.setattr(store_module, "REFRESH_S", 0.0)
    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((150, 8)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    store = EdgeStore(path=tmp_path, dim=8, settings=VectorSettings())
    try:
        await store.write("small", chunks_for(0, 50), vectors[:50])
        assert (await store.params_of("small")).hnsw_ef == 128
        await store.write("small", chunks_for(50, 100), vectors[50:])  # grown past the first row: read again
        assert (await store.params_of("small")).hnsw_ef == 300
        assert (await store.stats("small")).details["hnsw_ef"] == "300"
        (hits,) = await store.search("small", vectors[:1], 10, [])
        assert len(hits) == 10
    finally:
        await store.close()
