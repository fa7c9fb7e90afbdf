#!/bin/bash
# What sealing costs (issue 26; docs/security.md "Sealed at rest", docs/performance.md): one stack, one data
# dir, SciFact indexed as a plain and as a sealed collection (a key of its own), then FAST and BALANCED queries
# on both, alternated query by query.
#   1. index throughput: `hybridsearch index` timed alike for each, twice (plain, sealed, then both dropped and
#      indexed again in the other order); the passage embedding cache is var/cache's, copied in, warm for both,
#      so the embedding does not drown the sealing cost (round 1 fills whatever it lacked; round 2 is the figure)
#   2. `hybridsearch speed --collections plain,sealed --modes fast,balanced`: every judged query on each
#      collection in each mode, the collections' order flipped every other query; p50/p95/p99, nDCG@10 and
#      CPU per answer of every stack process, per column; the query vector cache off (every answer embeds its
#      query, whichever collection asked first)
# Outputs under OUT: index.json (both rounds), index-<collection>-<round>.txt (the index command's own
# report), speed.json, speed.txt; serve.log when the run failed.
# The stack is this script's own (its pid, its data dir under /tmp), on the ports the caller's HYBRIDSEARCH_*
# environment names (the defaults otherwise); stopped at the end, whatever happens.
# usage: docs/perf/sealed-cost.sh [OUT]   (default docs/perf/sealed-s14); env DATA (default SciFact)
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-docs/perf/sealed-s14}
DATA=${DATA:-../shared/datasets/scifact}
PLAIN=scifact-plain
SEALED=scifact-sealed
PY=${PY:-.venv/bin/python}
[ -d .shim ] && export PYTHONPATH=$PWD/.shim${PYTHONPATH:+:$PYTHONPATH}  # a worktree sharing main's venv
HS=("$PY" -m hybridsearch.cli)
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
WORK=$(mktemp -d /tmp/sealed-cost.XXXXXX)
export HYBRIDSEARCH_DATA_DIR=$WORK
export HYBRIDSEARCH_COLLECTIONS="{\"$SEALED\": {\"sealed\": true}}"
export HYBRIDSEARCH_VECTOR__QUERY_CACHE_SIZE=0 HYBRIDSEARCH_VECTOR__QUERY_CACHE_REDIS=false
export HYBRIDSEARCH_MODELS_DIR=${HYBRIDSEARCH_MODELS_DIR:-$PWD/var/models}
mkdir -p "$WORK/cache"
[ -f var/cache/embeddings.sqlite ] && cp var/cache/embeddings.sqlite "$WORK/cache/"
"${HS[@]}" keys create -c "$SEALED" >/dev/null

SERVE_PID=
stop() {  # this script's stack only (its pid), then its data dir
  if [ -n "$SERVE_PID" ]; then
    kill -TERM "$SERVE_PID" 2>/dev/null || true
    for _ in $(seq 1 60); do kill -0 "$SERVE_PID" 2>/dev/null || break; sleep 1; done
  fi
  rm -rf "$WORK"
}
trap stop EXIT
"${HS[@]}" serve all > "$OUT/serve.log" 2>&1 &
SERVE_PID=$!
for _ in $(seq 1 240); do grep -q "stack is up" "$OUT/serve.log" && break; sleep 1; done
grep -q "stack is up" "$OUT/serve.log" || { echo "the stack did not come up: $OUT/serve.log" >&2; exit 1; }

index() {  # $1 collection, $2 round: wall seconds of `hybridsearch index`, documents, documents per second
  local start end docs
  start=$(date +%s.%N)
  "${HS[@]}" index "$DATA" -c "$1" > "$OUT/index-$1-$2.txt" 2>&1
  end=$(date +%s.%N)
  docs=$("${HS[@]}" stats -c "$1" --json 2>/dev/null | "$PY" -c 'import json,sys; print(min(int(s.get("documents", 0)) for s in json.load(sys.stdin)["stores"]))' \
         || zcat "$DATA/corpus.jsonl.gz" | wc -l)
  "$PY" -c "import json,sys; s=float(sys.argv[3])-float(sys.argv[2]); d=int(sys.argv[4]); \
print(json.dumps({'collection': sys.argv[1], 'round': int(sys.argv[5]), 'seconds': round(s, 2), 'documents': d, \
'docs_per_s': round(d / s, 1)}))" "$1" "$start" "$end" "$docs" "$2" > "$OUT/index-$1-$2.json"; cat "$OUT/index-$1-$2.json"
}
index "$PLAIN" 1
index "$SEALED" 1
"${HS[@]}" collections drop "$PLAIN" --yes > /dev/null
"${HS[@]}" collections drop "$SEALED" --yes > /dev/null
index "$SEALED" 2
index "$PLAIN" 2
"$PY" -c 'import json,sys; print(json.dumps([json.load(open(p)) for p in sys.argv[1:]], indent=1))' \
  "$OUT"/index-*-[12].json > "$OUT/index.json" && rm -f "$OUT"/index-*-[12].json

"${HS[@]}" speed "$DATA" --modes fast,balanced --collections "$PLAIN,$SEALED" --no-budget \
  --json-out "$OUT/speed.json" 2>&1 | tee "$OUT/speed.txt"
rm -f "$OUT/serve.log"  # kept only when something failed
