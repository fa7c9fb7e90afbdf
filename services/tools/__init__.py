"""Tooling that does not serve queries: benchmarks and the load generator (bench, perf), quality work
(levers, sweeps, tuning, typo generation), fault injection (faults) and reranker training. The serving
services never import from here (tests/tools/test_boundary.py checks it)."""
