#!/bin/bash
# The gateway's own CPU per FAST answer without gRPC (docs/perf/gateway-inprocess.py), old and new trees
# alternated: new, old, new, old... Each tree runs its own harness and code (PYTHONPATH=TREE/.shim, as
# the worktrees of this project are set up); only the ratios within one run compare (a shared machine).
# usage: docs/perf/ab-inprocess.sh OLD_TREE [NEW_TREE (this checkout)]   env: ROUNDS (4), ANSWERS (300)
set -u
NEW=${2:-$(cd "$(dirname "$0")/../.." && pwd)}; OLD=$1
PY=${PY:-$NEW/.venv/bin/python}
for ROUND in $(seq 1 "${ROUNDS:-4}"); do
  for V in new old; do
    TREE=$NEW; [ $V = old ] && TREE=$OLD
    printf '%s %s: ' "$ROUND" "$V"
    (cd "$TREE" && PYTHONPATH="$TREE/.shim" "$PY" docs/perf/gateway-inprocess.py --answers "${ANSWERS:-300}")
  done
done
