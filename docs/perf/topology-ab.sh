#!/bin/bash
# Fusion as a service of its own (the chart's topology) against fusion inside the gateway (one machine's
# default), alternated on one machine, one tree: `hybridsearch speed` and a closed loop of each, per topology.
# usage: [HYBRIDSEARCH_DATA_DIR=DIR] docs/perf/topology-ab.sh OUT [ROUNDS]   (docs/performance.md, "Topology")
set -u
cd "$(dirname "$0")/../.."
OUT=${1:?usage: docs/perf/topology-ab.sh OUT [ROUNDS]}; ROUNDS=${2:-2}
mkdir -p "$OUT"
export HYBRIDSEARCH_DATA_DIR=${HYBRIDSEARCH_DATA_DIR:-$PWD/var}
stop() {
  if [ -f "$OUT/serve.pid" ]; then kill -TERM "$(cat "$OUT/serve.pid")" 2>/dev/null; rm -f "$OUT/serve.pid"; fi
  for _ in $(seq 1 60); do pgrep -f "$HYBRIDSEARCH_DATA_DIR/supervisor/supervisord.conf" >/dev/null || break; sleep 1; done
}
trap stop EXIT
for ROUND in $(seq 1 "$ROUNDS"); do
  for TOPOLOGY in service gateway; do
    stop
    if [ $TOPOLOGY = service ]; then IN='[]'; else IN='["fusion"]'; fi
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
