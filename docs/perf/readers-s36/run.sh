#!/bin/bash
# Document readers on SciFact (issue 36): `hybridsearch readers-bench` against a stack served from this tree on the
# bench data dir (API keys on, as `serve all` makes them), the query-vector cache off. Writes readers.json here.
cd "$(dirname "$0")/../../.."
export HYBRIDSEARCH_DATA_DIR=${HYBRIDSEARCH_DATA_DIR:?a data dir to serve from} HYBRIDSEARCH_MODELS_DIR=${HYBRIDSEARCH_MODELS_DIR:-$PWD/var/models} HYBRIDSEARCH_EXPANSION__LLM_SERVE="" HYBRIDSEARCH_VECTOR__QUERY_CACHE_SIZE=0 HYBRIDSEARCH_VECTOR__QUERY_CACHE_REDIS=false
OUT=docs/perf/readers-s36
nohup .venv/bin/hybridsearch serve all > var/readers-serve.log 2>&1 &
SERVE=$!
for _ in $(seq 1 180); do grep -q "stack is up" var/readers-serve.log 2>/dev/null && break; sleep 1; done
.venv/bin/hybridsearch readers-bench ../shared/datasets/scifact --shares 1,10,50 --modes bm25,vector,hybrid,default \
  --limit ${LIMIT:-300} --json-out $OUT/readers.json 2>&1 | grep -v "━" | tee $OUT/readers.txt
kill -TERM $SERVE; wait $SERVE
