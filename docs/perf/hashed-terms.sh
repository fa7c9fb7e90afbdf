#!/bin/bash
# SciFact (or another BEIR folder) as a plain collection and as a sealed hashed-terms one (sealed: true,
# sealed_terms: hashed; security/hashed_terms.py): nDCG@10 in BM25 mode, FAST, each through a real stack of
# its own (`hybridsearch bench --modes bm25 --start`), the bench's own collection name declared hashed in
# the second. The passage-embedding cache (var/cache) is linked into both data dirs, so indexing re-embeds
# nothing it has seen. Figures: docs/security.md ("Hashed terms").
# usage: docs/perf/hashed-terms.sh [FOLDER]      (default ../shared/datasets/scifact; never copied here)
#        PY=python PORT_SHIFT=N: the interpreter, and ports moved off a running stack's (default 100)
set -eu
cd "$(dirname "$0")/../.."
PY=${PY:-.venv/bin/python}
FOLDER=${1:-../shared/datasets/scifact}
OUT=var/perf-hashed-terms
SHIFT=${PORT_SHIFT:-100}
NAME=$($PY -c "from pathlib import Path; from hybridsearch.config.settings import get_settings
from hybridsearch.tools.bench import collection_name; print(collection_name(Path('$FOLDER'), get_settings()))")
. docs/perf/stack-ports.sh
for V in plain hashed; do
  export HYBRIDSEARCH_DATA_DIR=$OUT/$V HYBRIDSEARCH_COLLECTIONS='{}'
  mkdir -p "$HYBRIDSEARCH_DATA_DIR"
  for shared in cache models; do ln -sfn "$PWD/var/$shared" "$HYBRIDSEARCH_DATA_DIR/$shared"; done
  if [ $V = hashed ]; then
    export HYBRIDSEARCH_COLLECTIONS="{\"$NAME\": {\"sealed\": true, \"sealed_terms\": \"hashed\"}}"
    grep -qs "$NAME:" "$HYBRIDSEARCH_DATA_DIR/sealing/keys.yaml" || $PY -m hybridsearch.cli keys create -c "$NAME"
  fi
  $PY -m hybridsearch.cli bench "$FOLDER" --modes bm25 --json --start > "$OUT/$V.json"
  $PY -c "import json; r = json.load(open('$OUT/$V.json'))['modes']['bm25']; print('$V', '$NAME', r)"
done
