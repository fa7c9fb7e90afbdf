#!/bin/bash
# gRPC core's EventEngine (grpcio 1.85's default) against its legacy iomgr polling (GRPC_EXPERIMENTS=-event_engine_client,
# -event_engine_listener) for every service and the client, the stack alternated twice: speed over 100 SciFact queries
# and closed loops (bench environment: docs/performance.md). Output: event-engine/ab.txt and the JSON there.
cd "$(dirname "$0")/../../../.."
OUT=docs/perf/session-s39/experiments/event-engine; mkdir -p $OUT; : > $OUT/ab.txt
docs/perf/session-s38/experiments/alternate.sh GRPC_EXPERIMENTS '
export GRPC_EXPERIMENTS="$V"; L=${V:+legacy}; L=${L:-default}
.venv/bin/hybridsearch speed ../shared/datasets/scifact --modes bm25,fast,balanced --limit 100 --no-budget --json-out docs/perf/session-s39/experiments/event-engine/speed-$L-$ROUND.json 2>&1 | grep "^| [a-z]" | sed "s/^/$L r$ROUND /" >> docs/perf/session-s39/experiments/event-engine/ab.txt
for S in fast balanced; do
  .venv/bin/hybridsearch loadtest closed -s $S --workers 4 --duration 20 --queries-from ../shared/datasets/scifact -c bench-scifact-8c1bc262 > /dev/null 2>&1
  F=$(ls -td $HYBRIDSEARCH_DATA_DIR/loadtest/*-closed | head -1)/loadtest.json
  python3 -c "import json,sys; r=json.load(open(sys.argv[1]))[\"runs\"][0]; print(\"%s r%s\" % (sys.argv[2], sys.argv[3]), r[\"name\"], \"closed 4 workers: %.1f answers/s, p50 %.1f, p99 %.1f ms\" % (r[\"throughput_qps\"], r[\"latency_ms\"][\"p50\"], r[\"latency_ms\"][\"p99\"]))" $F $L $ROUND >> docs/perf/session-s39/experiments/event-engine/ab.txt
done' "" "-event_engine_client,-event_engine_listener"
