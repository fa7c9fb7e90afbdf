"""Which requests a load run sends (tools/perf/load/scenarios.py): Zipf-repeated query sequences (--zipf)."""

from __future__ import annotations

import numpy as np

from hybridsearch.tools.perf.load.scenarios import ZIPF_DRAWS, repeat_share, zipf_ranks, zipf_sequence


def test_zipf_draws_follow_one_over_rank():
    draws = zipf_ranks(300, 20_000, 1.0, np.random.default_rng(0))
    counts = np.bincount(draws, minlength=300)
    harmonic = sum(1 / r for r in range(1, 301))
    assert abs(counts[0] / 20_000 - 1 / harmonic) < 0.01  # ~16% for the first of 300
    assert abs(counts[0] / counts[1] - 2) < 0.3 and abs(counts[0] / counts[9] - 10) < 2.5
    assert zipf_ranks(300, 50, 1.0, np.random.default_rng(3)) == zipf_ranks(300, 50, 1.0, np.random.default_rng(3))
    assert max(zipf_ranks(5, 100, 1.0, np.random.default_rng(1))) <= 4


def test_repeat_share():
    assert repeat_share(["a", "b", "a", "a"]) == 0.5 and repeat_share(["a", "b"]) == 0.0 and repeat_share([]) == 0.0


def test_a_zipf_sequence_repeats_its_queries_as_real_traffic_does():
    queries = [f"q{i}" for i in range(300)]
    sequence = zipf_sequence(queries, 1.0, seed=7)
    assert len(sequence) == ZIPF_DRAWS * 300 and set(sequence) <= set(queries)
    top = max(set(sequence), key=sequence.count)
    harmonic = sum(1 / r for r in range(1, 301))
    assert abs(sequence.count(top) / len(sequence) - 1 / harmonic) < 0.02
    assert zipf_sequence(queries, 1.0, seed=7) == sequence and zipf_sequence(queries, 1.0, seed=8) != sequence
    assert repeat_share(sequence) > 0.9  # 6,000 requests over 300 queries
    flatter = zipf_sequence(queries, 0.5, seed=7)
    assert max(flatter.count(q) for q in set(flatter)) < sequence.count(top)
