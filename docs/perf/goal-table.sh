#!/bin/bash
# Issue 24's goal table on a quiet machine, this tree ("new") against BASE ("old", default c978ac6, where
# the issue was filed), one of each, whole trees alternated by ab-trees.sh on one data dir: per tree
# `speed` (sequential p50/p99 and CPU per answer against the in-process baseline of the same run), a
# closed loop of 4 workers (answers/s, p99, CPU per answer) for FAST and BALANCED, and FAST's CPU budget by
# stage (py-spy, flame.sh); then the hop floor (hop-cost). The query vector cache is off: fresh queries,
# as the baseline sees them. Outputs in OUT/{new,old}/ and OUT/hop.json.
# usage: docs/perf/goal-table.sh OUT [BASE]      (PY_SPY: py-spy's path, default /tmp/pyspy/bin/py-spy)
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=$(realpath -m "${1:?usage: docs/perf/goal-table.sh OUT [BASE]}"); BASE=${2:-c978ac6}
export OUT PY_SPY=${PY_SPY:-/tmp/pyspy/bin/py-spy}
export HYBRIDSEARCH_VECTOR__QUERY_CACHE_SIZE=0 HYBRIDSEARCH_VECTOR__QUERY_CACHE_REDIS=false
mkdir -p "$OUT/new" "$OUT/old"
ROUNDS=1 docs/perf/ab-trees.sh "$BASE" '
  D=$OUT/$V; DATA=../shared/datasets/scifact
  .venv/bin/hybridsearch speed $DATA --modes bm25,fast,balanced --no-budget --json-out $D/speed.json > $D/speed.txt 2>&1
  .venv/bin/hybridsearch loadtest closed --workers 4 --duration 30 --scenario fast,balanced --dataset $DATA \
    --baseline-from $D/speed.json --out $D/closed4 > $D/closed4.txt 2>&1
  BASELINE=$D/speed.json DURATION=20 docs/perf/flame.sh $D/flame-fast > $D/flame.txt 2>&1
  grep "^| [a-z]" $D/speed.txt | sed "s/^/$V /"; grep "CPU per answer" $D/closed4.txt | sed "s/^/$V /"'
.venv/bin/hybridsearch hop-cost --calls 2000 --json-out "$OUT/hop.json"
