#!/bin/bash
# Old/new `hybridsearch speed` runs alternated on one machine (docs/performance.md §0.1).
# usage: docs/perf/ab-speed.sh BASE PATH...   "old" = PATHs as at commit BASE, "new" = HEAD; new, old, new, old.
# Stops and starts `serve all` from this checkout for each run (its data dir keeps the indexed collection).
set -u
cd "$(dirname "$0")/../.."
BASE=$1; shift
restart() {
  pkill -TERM -f "^$PWD/.venv/bin/python3.11 .venv/bin/hybridsearch serve all"
  for _ in $(seq 1 60); do pgrep -f "^$PWD/.venv/bin/python3.11 -m (hybridsearch.cli serve|supervisor)" >/dev/null || break; sleep 1; done
  (nohup .venv/bin/hybridsearch serve all > var/ab-serve.log 2>&1 &)
  for _ in $(seq 1 120); do grep -q "stack is up" var/ab-serve.log 2>/dev/null && return; sleep 1; done
  echo "the stack did not come up: var/ab-serve.log" >&2; exit 1
}
for round in 1 2; do
  for v in new old; do
    if [ $v = old ]; then git checkout -q "$BASE" -- "$@"; else git checkout -q HEAD -- "$@"; fi
    restart
    .venv/bin/hybridsearch speed ../shared/datasets/scifact --modes bm25,fast,balanced --no-budget \
      --json-out "docs/perf/ab-speed-$v-$round.json" 2>&1 | grep "^| [a-z]" | sed "s/^/$v r$round /"
  done
done
git checkout -q HEAD -- "$@"
