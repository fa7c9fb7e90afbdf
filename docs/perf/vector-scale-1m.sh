#!/bin/bash
# The vector store alone at 1M (§5): static-minilm bench vectors, the service's engine in-process, with the
# memory settings of a large collection (vector.quantization=int8, vector.on_disk_vectors=true, both in the
# chart's values): int8 codes kept in RAM and rescored against the originals (oversampling 2), the original
# vectors and the payloads memory-mapped. Bulk load, one HNSW build, reopen,
# recall@10/@100 against the exact scan of the original vectors at the served beam (128) and at 256 / 512,
# search p50/p99, disk, a written document's visibility. Resumable: run it again and it goes on from the
# store it finds (vector-scale --resume); the embedding cache (scale-corpus --embed) is filled first.
# A monitor samples the tool's resident memory, its store's size on disk and its CPU every 10 s.
# usage: docs/perf/vector-scale-1m.sh DATA_DIR OUT_JSON      (SIZE: corpus passages, default 1000000)
set -euo pipefail
cd "$(dirname "$0")/../.."
DATA=$(realpath -m "${1:?usage: docs/perf/vector-scale-1m.sh DATA_DIR OUT_JSON}")
JSON=$(realpath -m "${2:?usage: docs/perf/vector-scale-1m.sh DATA_DIR OUT_JSON}")
SIZE=${SIZE:-1000000}
CORPUS=~/.cache/hybridsearch/scale/scale-$SIZE/corpus.jsonl.gz
export HYBRIDSEARCH_VECTOR__QUANTIZATION=int8 HYBRIDSEARCH_VECTOR__ON_DISK_VECTORS=true
mkdir -p "$DATA"
.venv/bin/hybridsearch scale-corpus --size "$SIZE" --embed --data-dir "$DATA" --embedder static-minilm --threads 2

RESUME=(); [ -d "$DATA/qdrant-edge/vector-scale" ] && RESUME=(--resume)
.venv/bin/hybridsearch vector-scale "$CORPUS" --queries-from ../shared/datasets/scifact --data-dir "$DATA" \
  --embedder static-minilm --ef 256 --ef 512 "${RESUME[@]}" --json-out "$JSON" &
TOOL=$!
MONITOR=${JSON%.json}-monitor.log
while kill -0 $TOOL 2>/dev/null; do
  { printf '%s ' "$(date -u +%T)"
    printf 'store=%sMiB ' "$(du -sm "$DATA/qdrant-edge" 2>/dev/null | cut -f1)"
    grep -E '^(VmHWM|VmRSS)' /proc/$TOOL/status 2>/dev/null | tr -s ' \t' ' ' | tr '\n' ' '
    printf 'cpu_s=%s\n' "$(awk '{print ($14+$15)/100}' /proc/$TOOL/stat 2>/dev/null)"
  } >> "$MONITOR"
  sleep 10
done
wait $TOOL
