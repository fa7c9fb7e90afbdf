#!/usr/bin/env bash
# docs/operations.md "Snapshots at 100k documents": a collection of 100k passages (static-minilm vectors, as
# docs/perf/scale-static.sh builds it: the corpus, its vectors, indexed through a stack of its own), then
# docs/perf/snapshot-run.py over it: a snapshot taken while 50 documents/s are written and searches run, a
# second (incremental) one 30 s later, the first restored under a new name and checked id by id, then
# `reconcile --dry-run` of the restored collection. Resumable: the corpus, its vectors and the indexed stores
# stay in $DATA.
#   docs/perf/snapshot-100k.sh            (OUT: docs/perf/snapshot-100k; SETUP_ONLY=1: stop once indexed)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
HS=${HS:-$ROOT/.venv/bin/hybridsearch}
PY=${PY:-$ROOT/.venv/bin/python}
SHIFT=${SHIFT:-300}
DATA=${DATA:-$ROOT/var/snapshot-100k}
OUT=${OUT:-$ROOT/docs/perf/snapshot-100k}
CACHE=${CACHE:-$HOME/.cache/hybridsearch/scale}
PASSAGES=${PASSAGES:-100000}
COLLECTION=${COLLECTION:-snap-100k}
CORPUS=$CACHE/scale-$PASSAGES/corpus.jsonl.gz
mkdir -p "$OUT" "$DATA"
export COLUMNS=250 HYBRIDSEARCH_DATA_DIR=$DATA HYBRIDSEARCH_MODELS_DIR=$ROOT/var/models
export HYBRIDSEARCH_VECTOR__EMBEDDER=static-minilm
. "$ROOT/docs/perf/stack-ports.sh"
log() { echo "$(date -u +%FT%TZ) $*" | tee -a "$OUT/progress.log"; }

[ -e "$OUT/embed.done" ] || { log "embed: start"; $HS scale-corpus --size "$PASSAGES" --out "$CACHE" --embed \
  --embedder static-minilm --data-dir "$DATA" > "$OUT/embed.txt" 2>&1; touch "$OUT/embed.done"; log "embed: done"; }
$HS serve all > "$OUT/stack.txt" 2>&1 & STACK=$!
trap 'kill -TERM $STACK 2>/dev/null; wait $STACK 2>/dev/null || true' EXIT
for _ in $(seq 600); do grep -q "stack is up" "$OUT/stack.txt" && break; kill -0 "$STACK"; sleep 1; done
log "stack: up"
[ -e "$OUT/index.done" ] || { log "index: start"; $HS index "$CORPUS" -c "$COLLECTION" --batch-size 500 \
  > "$OUT/index.txt" 2>&1; touch "$OUT/index.done"; log "index: done"; }
sleep 5
# wait for the HNSW build after the bulk load (vector searches answer within a second, three times in a row)
$PY - "$COLLECTION" <<'WAIT'
import sys, time
from hybridsearch.client import GatewayClient
client, good = GatewayClient(), 0
while good < 3:
    started = time.perf_counter()
    try:
        hits = client.search("protein folding", collection=sys.argv[1], mode="vector", effort="fast", rerank=False, timeout=30).hits
        good = good + 1 if hits and time.perf_counter() - started < 1.0 else 0
    except Exception:
        good = 0
    time.sleep(2)
WAIT
log "hnsw: built"
[ -z "${SETUP_ONLY:-}" ] || exit 0  # the corpus indexed (e.g. at idle priority beside other work); the run later
$HS collections drop "$COLLECTION-restored" --yes > /dev/null 2>&1 || true
rm -rf "$DATA/snapshot-repository"
log "run: start"
$PY "$ROOT/docs/perf/snapshot-run.py" "$COLLECTION" "$DATA/snapshot-repository" "$OUT/run.json" 50 30 > "$OUT/run.txt" 2>&1
log "run: done"
$HS reconcile -c "$COLLECTION-restored" --dry-run > "$OUT/reconcile.txt" 2>&1 || echo "reconcile exit $?" >> "$OUT/reconcile.txt"
du -sb "$DATA/snapshot-repository" "$DATA/bm25-tantivy/$COLLECTION" "$DATA/qdrant-edge/$COLLECTION" > "$OUT/sizes.txt"
log "reconcile and sizes: done"
