#!/bin/bash
# Session 22's switch A/Bs: the whole stack started with the environment variable VAR unset ("") and set ("1"),
# or set to the two values given, alternated twice; COMMAND runs against each with $V (the value) and $ROUND set. The service code the switch
# selects was a temporary patch for the run (each caller says which). Run with the bench environment exported
# (HYBRIDSEARCH_DATA_DIR holding bench-scifact-8c1bc262, the query-vector cache off: docs/performance.md).
# usage: docs/perf/session-s38/experiments/alternate.sh VAR 'COMMAND' [A B]
set -u
cd "$(dirname "$0")/../../../.."
VAR=$1; COMMAND=$2; VALUES=("${3-}" "${4-1}")
stop() {
  pkill -TERM -f "hybridsearch serve all"
  for _ in $(seq 60); do pgrep -f "$HYBRIDSEARCH_DATA_DIR/supervisor/supervisord.conf" >/dev/null || break; sleep 1; done
}
trap stop EXIT
for ROUND in 1 2; do for V in "${VALUES[@]}"; do
  stop
  env "$VAR=$V" nohup .venv/bin/hybridsearch serve all > /tmp/alternate-serve.log 2>&1 &
  for _ in $(seq 120); do grep -q "stack is up" /tmp/alternate-serve.log && break; sleep 1; done
  export V ROUND
  bash -c "$COMMAND"
done; done
