#!/bin/bash
# The A/B of this folder as it was run (docs/performance.md names what it compares); appends to ab.txt here.
cd "$(dirname "$0")/../../.."
export HYBRIDSEARCH_DATA_DIR=${HYBRIDSEARCH_DATA_DIR:?a data dir holding SciFact as bench-scifact-8c1bc262} HYBRIDSEARCH_MODELS_DIR=${HYBRIDSEARCH_MODELS_DIR:-$PWD/var/models} HYBRIDSEARCH_EXPANSION__LLM_SERVE="" HYBRIDSEARCH_VECTOR__QUERY_CACHE_SIZE=0 HYBRIDSEARCH_VECTOR__QUERY_CACHE_REDIS=false
docs/perf/ab.sh 919dc28 '.venv/bin/hybridsearch speed ../shared/datasets/scifact --modes bm25,fast --limit 200 --no-budget --json-out docs/perf/previews-s35/speed-$V-$ROUND.json 2>&1 | grep "|" | sed "s/^/$V r$ROUND /" >> docs/perf/previews-s35/ab.txt' services/gateway/query/previews.py
echo "rc=$?" >> docs/perf/previews-s35/ab.txt
