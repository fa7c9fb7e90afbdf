#!/bin/bash
# Old/new `hybridsearch speed` runs alternated on one machine (docs/performance.md §0.1).
# usage: docs/perf/ab-speed.sh BASE PATH...   "old" = PATHs as at commit BASE, "new" = HEAD; new, old, new, old.
cd "$(dirname "$0")/../.."
BASE=$1; shift
exec docs/perf/ab.sh "$BASE" '.venv/bin/hybridsearch speed ../shared/datasets/scifact --modes bm25,fast,balanced --no-budget \
  --json-out "docs/perf/ab-speed-$V-$ROUND.json" 2>&1 | grep "^| [a-z]" | sed "s/^/$V r$ROUND /"' "$@"
