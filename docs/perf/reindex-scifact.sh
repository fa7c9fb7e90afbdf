#!/usr/bin/env bash
# docs/operations.md "Re-indexing SciFact under load": SciFact indexed with the deployment's embedder (MiniLM)
# through a stack of its own, then docs/perf/reindex-run.py: `hybridsearch reindex --embedder static-minilm
# --check` under 20 searches/s and 20 documents/s, both generations checked id by id, then `alias rollback`.
# Resumable: the indexed SciFact stays in $DATA (a rerun drops the alias first and indexes again).
#   docs/perf/reindex-scifact.sh            (OUT: docs/perf/reindex-scifact)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
HS=${HS:-$ROOT/.venv/bin/hybridsearch}
PY=${PY:-$ROOT/.venv/bin/python}
SHIFT=${SHIFT:-400}
DATA=${DATA:-$ROOT/var/reindex-scifact}
OUT=${OUT:-$ROOT/docs/perf/reindex-scifact}
FOLDER=${FOLDER:-$ROOT/../shared/datasets/scifact}
COLLECTION=${COLLECTION:-scifact-r}
EMBEDDER=${EMBEDDER:-static-minilm}
mkdir -p "$OUT" "$DATA"
export COLUMNS=200 HYBRIDSEARCH_DATA_DIR=$DATA HYBRIDSEARCH_MODELS_DIR=$ROOT/var/models
. "$ROOT/docs/perf/stack-ports.sh"
log() { echo "$(date -u +%FT%TZ) $*" | tee -a "$OUT/progress.log"; }

$HS serve all > "$OUT/stack.txt" 2>&1 & STACK=$!
trap 'kill -TERM $STACK 2>/dev/null; wait $STACK 2>/dev/null || true' EXIT
for _ in $(seq 600); do grep -q "stack is up" "$OUT/stack.txt" && break; kill -0 "$STACK"; sleep 1; done
log "stack: up"
$HS collections drop "$COLLECTION" --yes > /dev/null 2>&1 || true
log "index: start"
$HS index "$FOLDER/corpus.jsonl.gz" -c "$COLLECTION" > "$OUT/index.txt" 2>&1
log "index: done"
log "run: start"
HS=$HS $PY "$ROOT/docs/perf/reindex-run.py" "$COLLECTION" "$FOLDER" "$EMBEDDER" "$OUT/run.json" > "$OUT/run.txt" 2>&1
log "run: done"
