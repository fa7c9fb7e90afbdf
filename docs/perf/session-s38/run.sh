#!/bin/bash
# The A/B of this folder as it was run (docs/performance.md, issue 35, session 22): this tree against 4ca117f (the
# session's start), whole trees alternated twice; per run the speed table, the two closed loops and the hop table.
# Appends to ab.txt here.
cd "$(dirname "$0")/../../.."
export HYBRIDSEARCH_DATA_DIR=${HYBRIDSEARCH_DATA_DIR:?a data dir holding SciFact as bench-scifact-8c1bc262} HYBRIDSEARCH_MODELS_DIR=${HYBRIDSEARCH_MODELS_DIR:-$PWD/var/models} HYBRIDSEARCH_EXPANSION__LLM_SERVE="" HYBRIDSEARCH_VECTOR__QUERY_CACHE_SIZE=0 HYBRIDSEARCH_VECTOR__QUERY_CACHE_REDIS=false
OUT=docs/perf/session-s38
docs/perf/ab-trees.sh 4ca117f '.venv/bin/hybridsearch speed ../shared/datasets/scifact --modes bm25,fast,balanced --limit 200 --no-budget --json-out '$OUT'/speed-$V-$ROUND.json 2>&1 | grep "|" | sed "s/^/$V r$ROUND /" >> '$OUT'/ab.txt; for S in fast balanced; do .venv/bin/hybridsearch loadtest closed -s $S --workers 4 --duration 20 --queries-from ../shared/datasets/scifact -c bench-scifact-8c1bc262 > /dev/null 2>&1; F=$(ls -td $HYBRIDSEARCH_DATA_DIR/loadtest/*-closed | head -1)/loadtest.json; cp $F '$OUT'/load-$S-$V-$ROUND.json; python3 -c "import json,sys; r=json.load(open(sys.argv[1]))[\"runs\"][0]; print(sys.argv[2], r[\"name\"], \"closed 4 workers: %.1f answers/s, p50 %.1f, p99 %.1f ms\" % (r[\"throughput_qps\"], r[\"latency_ms\"][\"p50\"], r[\"latency_ms\"][\"p99\"]))" $F "$V r$ROUND" >> '$OUT'/ab.txt; done; .venv/bin/hybridsearch hops ../shared/datasets/scifact --queries 30 --calls 300 --modes bm25,fast,balanced --json-out '$OUT'/hops-$V-$ROUND.json 2>&1 | grep "|" | sed "s/^/$V r$ROUND /" >> '$OUT'/ab.txt'
echo "rc=$?" >> $OUT/ab.txt
