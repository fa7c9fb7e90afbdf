#!/bin/bash
# The A/B of this folder as it was run (docs/performance.md, issue 35, session 21): services/runtime/server.py with the
# set-up's heap frozen (new) against c555acb's (old: the packed fusion answers and the hops change already in), swapped file, alternated
# twice; per run FAST and BALANCED closed loops of 4 workers, 30 s. Appends to ab.txt here.
cd "$(dirname "$0")/../../.."
export HYBRIDSEARCH_DATA_DIR=${HYBRIDSEARCH_DATA_DIR:?a data dir holding SciFact as bench-scifact-8c1bc262} HYBRIDSEARCH_MODELS_DIR=${HYBRIDSEARCH_MODELS_DIR:-$PWD/var/models} HYBRIDSEARCH_EXPANSION__LLM_SERVE="" HYBRIDSEARCH_VECTOR__QUERY_CACHE_SIZE=0 HYBRIDSEARCH_VECTOR__QUERY_CACHE_REDIS=false
OUT=docs/perf/gc-s37
docs/perf/ab.sh "${BASE:-HEAD~1}" 'for S in fast balanced; do .venv/bin/hybridsearch loadtest closed -s $S --workers 4 --duration 30 --queries-from ../shared/datasets/scifact -c bench-scifact-8c1bc262 > /dev/null 2>&1; F=$(ls -td $HYBRIDSEARCH_DATA_DIR/loadtest/*-closed | head -1)/loadtest.json; cp $F '$OUT'/load-$S-$V-$ROUND.json; python3 -c "import json,sys; r=json.load(open(sys.argv[1]))[\"runs\"][0]; print(sys.argv[2], r[\"name\"], \"closed 4 workers: %.1f answers/s, p50 %.1f, p99 %.1f ms\" % (r[\"throughput_qps\"], r[\"latency_ms\"][\"p50\"], r[\"latency_ms\"][\"p99\"]))" $F "$V r$ROUND" >> '$OUT'/ab.txt; done' services/runtime/server.py
echo "rc=$?" >> $OUT/ab.txt
