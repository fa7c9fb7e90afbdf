#!/usr/bin/env bash
# docs/performance.md section 5, the static-minilm (model2vec) columns: one corpus size per call,
#   docs/perf/scale-static.sh 5k|100k|1m
# Every figure it writes is of "static-minilm (model2vec) vectors", not MiniLM's. Steps, each logged with
# its clock time to docs/perf/scale-static-<size>/progress.log and resumable (a step whose output exists
# is skipped; the embedding cache and the indexed stores stay in $DATA between calls):
#   1. the corpus and its vectors (`scale-corpus --embed --embedder static-minilm`; SciFact for 5k: the
#      vector service embeds it while indexing);
#   2. a stack of its own (ports moved by $SHIFT from the test ports, its own data dir; no LLM, no
#      metrics ports), the corpus indexed through the gateway, then the wait for the vector store's HNSW
#      build (until vector searches answer again; the builds' lines of its log go to hnsw.txt);
#   3. FAST, 1 worker closed loop, 30 s (p50 / p99, the services' RSS); a written document's visibility;
#      the same FAST queries at 25 QPS alone and beside 100 documents/s written (p99 ratio);
#   4. the stack stopped: store-probe (reopen, ANN recall@10 against the exact scan on the same static
#      vectors), the stores' size on disk; scale-static-<size>.json gathers it all.
# A corpus too large to index through the gateway in a session (1M here) can be loaded in-process instead,
# each store by its own tool into one data dir under one collection name: `vector-scale` (docs/perf/
# vector-scale-1m.sh) and `bm25-scale -c vector-scale --writers 0`, their JSON copied to
# scale-static-<size>/{vector,bm25}-scale.json and index.txt.done touched; then COLLECTION=vector-scale and
# DATA=that folder, and this script serves the stack over it for steps 3-4.
# Environment: HS (the hybridsearch command; default .venv/bin/hybridsearch), PY (its python), SHIFT (300), DATA (var/scale-static),
# COLLECTION (static-<size>), OUT (docs/perf/scale-static-<size>), NOTE (the summary's word on the machine),
# HYBRIDSEARCH_VECTOR__* (the vector settings),
# STEP_TIMEOUT (seconds a step may take, default 5400), BATCH (documents per Upsert while indexing, default 64
# as `hybridsearch index`; the 1M run used 500: one BM25 commit per request).
set -euo pipefail
SIZE=${1:?usage: scale-static.sh 5k|100k|1m}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
HS=${HS:-$ROOT/.venv/bin/hybridsearch}
PY=${PY:-$ROOT/.venv/bin/python}
SHIFT=${SHIFT:-300}
DATA=${DATA:-$ROOT/var/scale-static}
STEP_TIMEOUT=${STEP_TIMEOUT:-5400}
BATCH=${BATCH:-64}
SCIFACT=$ROOT/../shared/datasets/scifact
CACHE=${CACHE:-$HOME/.cache/hybridsearch/scale}
case $SIZE in
  5k) CORPUS=$SCIFACT; PASSAGES=0 ;;
  100k) PASSAGES=100000 ;;
  1m) PASSAGES=1000000 ;;
  *) echo "size: 5k, 100k or 1m" >&2; exit 2 ;;
esac
[ "$PASSAGES" = 0 ] || CORPUS=$CACHE/scale-$PASSAGES/corpus.jsonl.gz
COLLECTION=${COLLECTION:-static-$SIZE}
OUT=${OUT:-$ROOT/docs/perf/scale-static-$SIZE}
mkdir -p "$OUT" "$DATA"

export COLUMNS=250 HYBRIDSEARCH_DATA_DIR=$DATA HYBRIDSEARCH_MODELS_DIR=$ROOT/var/models
export HYBRIDSEARCH_VECTOR__EMBEDDER=static-minilm
. "$ROOT/docs/perf/stack-ports.sh"

log() { echo "$(date -u +%FT%TZ) $*" | tee -a "$OUT/progress.log"; }
step() {  # step NAME DONE_FILE COMMAND...: runs COMMAND (bounded) unless DONE_FILE exists; its seconds logged
  local name=$1 done=$2; shift 2
  if [ -e "$done" ]; then log "$name: done before ($done)"; return; fi
  log "$name: start"; local t0=$SECONDS
  timeout "$STEP_TIMEOUT" "$@"
  log "$name: finished in $((SECONDS - t0)) s"
}

STACK=
alive() {  # after a load step: a stack that stopped meanwhile (killed from outside) voids the step's figures
  kill -0 "$STACK" 2>/dev/null && ! grep -q "stopping" "$OUT/stack.txt" && return
  log "$1: the stack stopped during the step; its output moved to $2.void"; rm -rf "$2.void"; mv "$2" "$2.void"; exit 1
}
stop_stack() { [ -z "$STACK" ] || { kill -TERM "$STACK" 2>/dev/null || true; wait "$STACK" 2>/dev/null || true; STACK=; }; }
trap stop_stack EXIT

if [ "$PASSAGES" != 0 ]; then
  step embed "$OUT/embed.txt.done" bash -c "$HS scale-corpus --size $PASSAGES --out $CACHE --embed --embedder static-minilm \
    --data-dir $DATA > $OUT/embed.txt 2>&1 && cp $CACHE/scale-$PASSAGES/embedding-static-minilm.json $OUT/embedding.json \
    && touch $OUT/embed.txt.done"
fi

if [ ! -e "$OUT/probe.json" ]; then
  log "stack: starting (data dir $DATA, gateway port $HYBRIDSEARCH_ENDPOINTS__GATEWAY_PORT)"
  $HS serve all > "$OUT/stack.txt" 2>&1 & STACK=$!
  for _ in $(seq 600); do grep -q "stack is up" "$OUT/stack.txt" && break; kill -0 "$STACK"; sleep 1; done
  grep -q "stack is up" "$OUT/stack.txt"
  log "stack: up"
  step index "$OUT/index.txt.done" bash -c "$HS index $CORPUS -c $COLLECTION --batch-size $BATCH > $OUT/index.txt 2>&1 \
    && touch $OUT/index.txt.done"
  # The store builds HNSW once writes pause (2 s), holding the vector service's GIL: no search is answered
  # meanwhile. Wait until three vector searches in a row, 2 s apart, answer within a second.
  log "hnsw: waiting for the build after the bulk load"
  sleep 5
  timeout "$STEP_TIMEOUT" $PY - "$COLLECTION" <<'WAIT'
import sys, time
from hybridsearch.client import GatewayClient
client, good = GatewayClient(), 0
while good < 3:
    started = time.perf_counter()
    try:
        hits = client.search("protein folding", collection=sys.argv[1], mode="vector", effort="fast", rerank=False,
                             timeout=30).hits
        good = good + 1 if hits and time.perf_counter() - started < 1.0 else 0
    except Exception:
        good = 0
    time.sleep(2)
WAIT
  grep "optimized $COLLECTION " "$DATA/logs/vector.log" > "$OUT/hnsw.txt" || true
  log "hnsw: vector searches answer; builds so far: $(wc -l < "$OUT/hnsw.txt")"
  step fast "$OUT/closed1/loadtest.json" $HS loadtest closed --workers 1 --duration 30 --scenario fast \
    --queries-from "$SCIFACT" -c "$COLLECTION" --rss --out "$OUT/closed1"
  alive fast "$OUT/closed1"
  step visibility "$OUT/visibility.json" $HS write-visibility -c "$COLLECTION" --writes 20 --json-out "$OUT/visibility.json"
  alive visibility "$OUT/visibility.json"
  step mixed "$OUT/mixed/loadtest.json" $HS loadtest mixed --rate 25 --duration 30 --write-rate 100 --write-batch 10 \
    --write-corpus "$SCIFACT" --scenario fast --queries-from "$SCIFACT" -c "$COLLECTION" --rss --out "$OUT/mixed"
  alive mixed "$OUT/mixed"
  stop_stack
  log "stack: stopped"
  step probe "$OUT/probe.json" $HS store-probe -c "$COLLECTION" --queries-from "$SCIFACT" --json-out "$OUT/probe.json"
fi
python3 "$ROOT/docs/perf/scale_summary.py" "$OUT" "$SIZE" > "$OUT.json"
log "summary: $OUT.json"
