#!/bin/bash
# alternate variant_batch_wait_s settings on the new tree; balanced+fast only
cd "$(dirname "$0")/../../.."
export HYBRIDSEARCH_DATA_DIR=$PWD/var HYBRIDSEARCH_VECTOR__QUERY_CACHE_SIZE=0 HYBRIDSEARCH_VECTOR__QUERY_CACHE_REDIS=false
stop() {  # this script's stack only
  [ -f var/ab-serve.pid ] && kill -TERM "$(cat var/ab-serve.pid)" 2>/dev/null; rm -f var/ab-serve.pid
  for _ in $(seq 1 60); do pgrep -f "$PWD/var/supervisor/supervisord.conf" >/dev/null || break; sleep 1; done; }
for ROUND in 1 2; do for W in ${WAITS:-0.03 0}; do
  stop; rm -f var/ab-serve.log
  (HYBRIDSEARCH_QUERY__VARIANT_BATCH_WAIT_S=$W nohup .venv/bin/hybridsearch serve all > var/ab-serve.log 2>&1 & echo $! > var/ab-serve.pid)
  for _ in $(seq 1 180); do grep -q "stack is up" var/ab-serve.log 2>/dev/null && break; sleep 1; done
  .venv/bin/hybridsearch speed ../shared/datasets/scifact --modes ${MODES:-fast,balanced} --no-budget 2>&1 | grep "^| [a-z]" | sed "s/^/w=$W r$ROUND /"
done; done
stop
