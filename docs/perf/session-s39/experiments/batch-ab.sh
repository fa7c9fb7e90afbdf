#!/bin/bash
# Query embeddings batched across calls (vector.query_batch_texts 16) against each call alone (1, as before), the
# stack alternated twice: closed loops of 4 workers, 20 s, FAST and BALANCED, fresh queries (run with the bench
# environment: docs/performance.md), with query-batches.patch applied (git apply; not kept). Output: batch-ab.txt here.
# slots-ab.txt: the same with the patch's TMP_EMBED_SLOTS 2 against 1 (model slots); batch-8-workers.txt: FAST with 8
# workers (the command of this script with --workers 8, 1 against 16).
cd "$(dirname "$0")/../../../.."
OUT=docs/perf/session-s39/experiments; : > $OUT/batch-ab.txt
docs/perf/session-s38/experiments/alternate.sh HYBRIDSEARCH_VECTOR__QUERY_BATCH_TEXTS '
for S in fast balanced; do
  .venv/bin/hybridsearch loadtest closed -s $S --workers 4 --duration 20 --queries-from ../shared/datasets/scifact -c bench-scifact-8c1bc262 > /dev/null 2>&1
  F=$(ls -td $HYBRIDSEARCH_DATA_DIR/loadtest/*-closed | head -1)/loadtest.json
  python3 -c "import json,sys; r=json.load(open(sys.argv[1]))[\"runs\"][0]; print(\"batch_texts=%s r%s\" % (sys.argv[2], sys.argv[3]), r[\"name\"], \"closed 4 workers: %.1f answers/s, p50 %.1f, p99 %.1f ms\" % (r[\"throughput_qps\"], r[\"latency_ms\"][\"p50\"], r[\"latency_ms\"][\"p99\"]))" $F $V $ROUND | tee -a '$OUT'/batch-ab.txt
done
curl -s 127.0.0.1:9466/metrics 2>/dev/null | grep "query_embed_batch_calls_\(sum\|count\)" | sed "s/^/batch_texts=$V r$ROUND /" | tee -a '$OUT'/batch-ab.txt' 1 16
