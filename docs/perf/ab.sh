#!/bin/bash
# Old/new runs of any benchmark alternated on one machine: new, old, new, old.
# usage: docs/perf/ab.sh BASE 'COMMAND' PATH...   "old" = PATHs as at commit BASE, "new" = HEAD.
# Stops and starts `serve all` from this checkout before each run (its data dir keeps indexed collections);
# COMMAND runs with $V (new|old) and $ROUND (1|2) set, e.g. to name its output; ROUNDS=1 for one of each
# (figures that do not vary from run to run, such as nDCG).
set -u
cd "$(dirname "$0")/../.."
BASE=$1; COMMAND=$2; shift 2
restart() {
  pkill -TERM -f "^$PWD/.venv/bin/python3.11 .venv/bin/hybridsearch serve all"
  for _ in $(seq 1 60); do pgrep -f "^$PWD/.venv/bin/python3.11 -m (hybridsearch.cli serve|supervisor)" >/dev/null || break; sleep 1; done
  rm -f var/ab-serve.log  # the last run's "stack is up" must not answer for this one
  (nohup .venv/bin/hybridsearch serve all > var/ab-serve.log 2>&1 &)
  for _ in $(seq 1 120); do grep -q "stack is up" var/ab-serve.log 2>/dev/null && return; sleep 1; done
  echo "the stack did not come up: var/ab-serve.log" >&2; exit 1
}
for ROUND in $(seq 1 "${ROUNDS:-2}"); do
  for V in new old; do
    if [ $V = old ]; then git checkout -q "$BASE" -- "$@"; else git checkout -q HEAD -- "$@"; fi
    restart
    V=$V ROUND=$ROUND bash -c "$COMMAND"
  done
done
git checkout -q HEAD -- "$@"
