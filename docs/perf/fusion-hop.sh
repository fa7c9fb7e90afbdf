#!/bin/bash
# The fusion hop's cost, whole stack, quiet machine: FAST in a closed loop of 4 workers with the fusion
# service up ("hop": the gateway calls it) and stopped ("local": the gateway's call fails at once, its
# breaker opens, and it fuses in process with the same library, fusion/methods.py), alternated ROUNDS
# times on one stack, the query vector cache off. Prints each run's CPU per answer per process.
# usage: docs/perf/fusion-hop.sh OUT      (ROUNDS, default 2; DURATION s, default 30)
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=$(realpath -m "${1:?usage: docs/perf/fusion-hop.sh OUT}"); mkdir -p "$OUT"
export HYBRIDSEARCH_VECTOR__QUERY_CACHE_SIZE=0 HYBRIDSEARCH_VECTOR__QUERY_CACHE_REDIS=false
CTL=(.venv/bin/supervisorctl -s "unix://$PWD/var/supervisor/supervisord.sock")
nohup .venv/bin/hybridsearch serve all > "$OUT/serve.log" 2>&1 & SERVE=$!
trap 'kill -TERM $SERVE 2>/dev/null; wait $SERVE 2>/dev/null' EXIT
for _ in $(seq 1 180); do grep -q "stack is up" "$OUT/serve.log" && break; sleep 1; done
for ROUND in $(seq 1 "${ROUNDS:-2}"); do
  for V in hop local; do
    if [ $V = local ]; then "${CTL[@]}" stop fusion; else "${CTL[@]}" start fusion; sleep 3; fi
    .venv/bin/hybridsearch loadtest closed --workers 4 --duration "${DURATION:-30}" --scenario fast \
      --dataset ../shared/datasets/scifact --out "$OUT/$V-$ROUND" > "$OUT/$V-$ROUND.txt" 2>&1
    grep "CPU per answer" "$OUT/$V-$ROUND.txt" | sed "s/^/$V $ROUND /"
  done
done
"${CTL[@]}" start fusion
