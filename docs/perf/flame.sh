#!/bin/bash
# The stage-by-stage CPU budget (docs/performance.md, "How CPU per answer is measured"): py-spy on every
# Python service of the running stack during one bounded closed-loop run (FAST by default), per process a
# flame graph (NAME.svg) and its collapsed stacks (NAME.collapsed), folded into named buckets
# (services/tools/perf/budget.py) and printed as CPU ms per answer per bucket per process (budget.json).
# usage: docs/perf/flame.sh OUT [SCENARIO]
#   env: PY_SPY (default: py-spy on PATH, else .venv/bin/py-spy), DATA (a BEIR folder, default SciFact),
#        WORKERS (4), DURATION (seconds, 20), RATE (samples a second, 100), BASELINE (a speed --json-out file)
# py-spy is not a dependency of the project: python3 -m venv /tmp/pyspy && /tmp/pyspy/bin/pip install py-spy,
# then PY_SPY=/tmp/pyspy/bin/py-spy. It needs ptrace rights over the services: root, or the same user with
# kernel.yama.ptrace_scope=0. Fold a folder again (after changing the bucket table):
#   .venv/bin/python -m hybridsearch.tools.perf.budget OUT
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:?usage: docs/perf/flame.sh OUT [SCENARIO]}
SCENARIO=${2:-fast}
PY_SPY=${PY_SPY:-$(command -v py-spy || echo .venv/bin/py-spy)}
if [ ! -x "$PY_SPY" ]; then
  echo "py-spy not found. python3 -m venv /tmp/pyspy && /tmp/pyspy/bin/pip install py-spy, then" \
       "PY_SPY=/tmp/pyspy/bin/py-spy $0 $*" >&2
  exit 2
fi
BASELINE_ARGS=()
if [ -n "${BASELINE:-}" ]; then BASELINE_ARGS=(--baseline-from "$BASELINE"); fi
exec .venv/bin/hybridsearch loadtest closed --scenario "$SCENARIO" --workers "${WORKERS:-4}" \
  --duration "${DURATION:-20}" --dataset "${DATA:-../shared/datasets/scifact}" --profile "$OUT" --py-spy "$PY_SPY" \
  --profile-rate "${RATE:-100}" --out "$OUT/loadtest" ${BASELINE_ARGS[@]+"${BASELINE_ARGS[@]}"}
