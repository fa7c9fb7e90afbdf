"""The query vector cache measurement (tools/perf/query_cache.py): its Zipf draws, repeat share and the
hit rate it reads from the vector service's metrics."""

from __future__ import annotations

import numpy as np
from prometheus_client import generate_latest

from hybridsearch.common import metrics
from hybridsearch.tools.perf.query_cache import cache_lookups, hit_rate, parse_lookups, repeat_share, zipf_ranks


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


def test_hit_rate_from_the_services_exposition():
    lookups = metrics.QUERY_VECTOR_LOOKUPS
    before = parse_lookups(generate_latest().decode())
    lookups.labels(level="memory", result="hit").inc(3)
    lookups.labels(level="memory", result="miss").inc(2)
    lookups.labels(level="redis", result="hit").inc(1)
    lookups.labels(level="redis", result="miss").inc(1)
    rate = hit_rate(before, parse_lookups(generate_latest().decode()))
    assert rate["lookups"] == 5 and rate["hits"] == 4 and rate["hit_rate"] == 0.8
    assert rate["by_level"] == {"memory.hit": 3, "memory.miss": 2, "redis.hit": 1, "redis.miss": 1}
    assert hit_rate(None, before) is None
    assert cache_lookups("http://127.0.0.1:9/metrics") is None and cache_lookups(None) is None
