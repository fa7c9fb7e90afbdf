#!/bin/bash
# Where issue 35's goals stand at the session's end (the tree unchanged since 4bd118c): the stack in one machine's
# default topology, twice (stopped and started between): `speed` over 200 SciFact queries in the three modes, and
# closed loops of 4 workers, 20 s, FAST and BALANCED, fresh queries. Run with the bench environment exported
# (docs/performance.md). Output: goals.txt and the JSON here.
set -u
cd "$(dirname "$0")/../../.."
OUT=docs/perf/session-s39; : > $OUT/goals.txt
stop() { pkill -TERM -f "hybridsearch serve all"; for _ in $(seq 60); do pgrep -f "$HYBRIDSEARCH_DATA_DIR/supervisor/supervisord.conf" >/dev/null || break; sleep 1; done; }
trap stop EXIT
for ROUND in 1 2; do
  stop
  nohup .venv/bin/hybridsearch serve all > /tmp/goals-serve.log 2>&1 &
  for _ in $(seq 120); do grep -q "stack is up" /tmp/goals-serve.log && break; sleep 1; done
  .venv/bin/hybridsearch speed ../shared/datasets/scifact --modes bm25,fast,balanced --limit 200 --no-budget \
    --json-out $OUT/speed-$ROUND.json 2>&1 | grep "|" | sed "s/^/r$ROUND /" >> $OUT/goals.txt
  for S in fast balanced; do
    .venv/bin/hybridsearch loadtest closed -s $S --workers 4 --duration 20 --queries-from ../shared/datasets/scifact \
      -c bench-scifact-8c1bc262 > /dev/null 2>&1
    F=$(ls -td $HYBRIDSEARCH_DATA_DIR/loadtest/*-closed | head -1)/loadtest.json; cp $F $OUT/load-$S-$ROUND.json
    python3 -c "import json,sys; r=json.load(open(sys.argv[1]))['runs'][0]; print('r%s %s closed 4 workers: %.1f answers/s, p50 %.1f, p99 %.1f ms' % (sys.argv[2], r['name'], r['throughput_qps'], r['latency_ms']['p50'], r['latency_ms']['p99']))" $F $ROUND >> $OUT/goals.txt
  done
done
