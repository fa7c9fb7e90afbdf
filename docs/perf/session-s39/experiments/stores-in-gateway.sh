#!/bin/bash
# Session 23's experiment (docs/performance.md, issue 35): gateway A, the stack's (one machine's default topology:
# fusion and expansion inside, the stores over their hops), against gateway B (stores-in-gateway.py: the stores'
# own servicers in its process too, over a copy of the store folders): every SciFact query of each mode asked of
# both in turn (stores-in-gateway-drive.py), then closed loops of 4 workers, 20 s, of each, alternated, twice.
# Run with the bench environment exported (docs/performance.md). Output: stores-in-gateway.txt here.
set -u
cd "$(dirname "$0")/../../../.."
HERE=docs/perf/session-s39/experiments; OUT=$HERE/stores-in-gateway.txt; : > $OUT
COPY=$(mktemp -d); cp -r "$HYBRIDSEARCH_DATA_DIR"/{bm25-tantivy,qdrant-edge,cache} "$COPY"/
nohup .venv/bin/hybridsearch serve all > /tmp/sig-serve.log 2>&1 &
for _ in $(seq 120); do grep -q "stack is up" /tmp/sig-serve.log && break; sleep 1; done
HYBRIDSEARCH_ENDPOINTS__GATEWAY_PORT=50151 HYBRIDSEARCH_METRICS_PORT=0 nohup .venv/bin/python $HERE/stores-in-gateway.py "$COPY" > /tmp/sig-b.log 2>&1 &
B=$!
for _ in $(seq 120); do grep -q "serving on" /tmp/sig-b.log && break; sleep 1; done
stop() { kill $B; pkill -TERM -f "hybridsearch serve all"; sleep 5; rm -rf "$COPY"; }
trap stop EXIT
for ROUND in 1 2; do
  .venv/bin/python $HERE/stores-in-gateway-drive.py $B r$ROUND 150 | sed "s/^/r$ROUND sequential /" | tee -a $OUT
  for ADDR in 127.0.0.1:50051 127.0.0.1:50151; do for S in fast balanced; do
    .venv/bin/hybridsearch loadtest closed -s $S --workers 4 --duration 20 --queries-from ../shared/datasets/scifact \
      -c bench-scifact-8c1bc262 --address $ADDR > /dev/null 2>&1
    F=$(ls -td $HYBRIDSEARCH_DATA_DIR/loadtest/*-closed | head -1)/loadtest.json
    python3 -c "import json,sys; r=json.load(open(sys.argv[1]))['runs'][0]; print('r%s closed %s (%s): %.1f answers/s, p50 %.1f, p99 %.1f ms' % (sys.argv[2], r['name'], 'A, stores apart' if sys.argv[3].endswith('50051') else 'B, stores inside', r['throughput_qps'], r['latency_ms']['p50'], r['latency_ms']['p99']))" $F $ROUND $ADDR | tee -a $OUT
  done; done
done
