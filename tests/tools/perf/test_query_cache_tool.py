"""The query vector cache measurement (tools/perf/query_cache.py): the
hit rate it reads from the vector service's metrics."""

from __future__ import annotations

from prometheus_client import generate_latest

from hybridsearch.runtime import metrics
from hybridsearch.tools.perf.query_cache import cache_lookups, hit_rate, parse_lookups


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
