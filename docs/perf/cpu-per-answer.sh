#!/bin/bash
# CPU per answer, the headline cost figure (docs/performance.md, "How CPU per answer is measured"), on a
# quiet machine with `hybridsearch serve all` running from this checkout (nothing else busy on its cores):
#   1. speed: every judged query through the in-process baseline and the gateway in each mode, interleaved;
#      each mode's CPU per answer per process, the baseline's CPU per query (its thread's), the ratio, and
#      both outside the query embedding (speed.json, speed.txt)
#   2. closed loop, 4 workers, 30 s per scenario: CPU per answer under load, against the baseline's from 1
#   3. the FAST stage budget: py-spy flame graphs and CPU per answer per bucket (flame.sh; skipped without py-spy)
# Fresh-query figures (every answer embeds its query, as the baseline does) need the query vector cache off,
# in the shell that starts the stack and runs this script alike:
#   export HYBRIDSEARCH_VECTOR__QUERY_CACHE_SIZE=0 HYBRIDSEARCH_VECTOR__QUERY_CACHE_REDIS=false
# With the cache on (the default) the figures are the cached stack's, and the outputs say so.
# usage: docs/perf/cpu-per-answer.sh [OUT]   (default docs/perf/cpu-<date>); env DATA (default SciFact)
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-docs/perf/cpu-$(date +%Y%m%d)}
DATA=${DATA:-../shared/datasets/scifact}
mkdir -p "$OUT"
.venv/bin/hybridsearch speed "$DATA" --modes bm25,vector,fast,balanced --json-out "$OUT/speed.json" \
  2>&1 | tee "$OUT/speed.txt"
.venv/bin/hybridsearch loadtest closed --workers 4 --duration 30 --scenario fast,balanced,bm25,vector \
  --dataset "$DATA" --baseline-from "$OUT/speed.json" --out "$OUT/closed4" 2>&1 | tee "$OUT/closed4.txt"
if PY_SPY=${PY_SPY:-$(command -v py-spy || echo .venv/bin/py-spy)} && [ -x "$PY_SPY" ]; then
  PY_SPY=$PY_SPY BASELINE="$OUT/speed.json" DATA="$DATA" docs/perf/flame.sh "$OUT/flame-fast" fast \
    2>&1 | tee "$OUT/flame-fast.txt"
else
  echo "py-spy not found: no stage budget (see docs/perf/flame.sh)" >&2
fi
