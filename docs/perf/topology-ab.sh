#!/bin/bash
# Two topologies alternated on one machine, one tree: `hybridsearch speed` and a closed loop of each, per topology.
# By default fusion as a service of its own (the chart's topology, "[]") against fusion inside the gateway
# ('["fusion"]'); any two topology.in_gateway values as the third and fourth arguments.
# usage: [HYBRIDSEARCH_DATA_DIR=DIR] docs/perf/topology-ab.sh OUT [ROUNDS] [A B]   (docs/performance.md, "Topology")
set -u
cd "$(dirname "$0")/../.."
OUT=${1:?usage: docs/perf/topology-ab.sh OUT [ROUNDS] [A B]}; ROUNDS=${2:-2}
TOPOLOGIES=("${3:-[]}" "${4:-[\"fusion\"]}")
mkdir -p "$OUT"
export HYBRIDSEARCH_DATA_DIR=${HYBRIDSEARCH_DATA_DIR:-$PWD/var}
label() {  # [] -> service (every part a process of its own), ["fusion"] -> gateway (as before), else the parts inside
  case "$1" in '[]') echo service ;; '["fusion"]') echo gateway ;; *) echo "$1" | tr -d '[]" ' | tr ',' '+' ;; esac
}
stop() {
  if [ -f "$OUT/serve.pid" ]; then kill -TERM "$(cat "$OUT/serve.pid")" 2>/dev/null; rm -f "$OUT/serve.pid"; fi
  for _ in $(seq 1 60); do pgrep -f "$HYBRIDSEARCH_DATA_DIR/supervisor/supervisord.conf" >/dev/null || break; sleep 1; done
}
trap stop EXIT
for ROUND in $(seq 1 "$ROUNDS"); do
  for IN in "${TOPOLOGIES[@]}"; do
    TOPOLOGY=$(label "$IN")
    stop
    HYBRIDSEARCH_TOPOLOGY__IN_GATEWAY=$IN nohup .venv/bin/hybridsearch serve all > "$OUT/serve.log" 2>&1 &
    echo $! > "$OUT/serve.pid"
    for _ in $(seq 1 180); do grep -q "stack is up" "$OUT/serve.log" 2>/dev/null && break; sleep 1; done
    .venv/bin/hybridsearch speed ../shared/datasets/scifact --modes bm25,fast,balanced --no-budget --limit 100 \
      --json-out "$OUT/speed-$TOPOLOGY-$ROUND.json" 2>&1 | grep "^| [a-z]" | sed "s/^/$TOPOLOGY r$ROUND /"
    .venv/bin/hybridsearch loadtest closed --scenario fast,balanced --workers 4 --duration 20 \
      --dataset ../shared/datasets/scifact --out "$OUT/closed-$TOPOLOGY-$ROUND" > "$OUT/closed-$TOPOLOGY-$ROUND.txt" 2>&1
    grep -E "CPU per answer" "$OUT/closed-$TOPOLOGY-$ROUND.txt" | sed "s/^/$TOPOLOGY r$ROUND /"
  done
done
rm -f "$OUT/serve.log"
