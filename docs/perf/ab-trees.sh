#!/bin/bash
# Old/new runs of any benchmark alternated on one machine, whole trees: new, old, new, old. For changes
# too wide for ab.sh's file swap (modules added, moved or split): "old" is a git worktree of BASE, with its
# own generated stubs, serving from the same data dir (indexed collections, models, keys) as "new" (this
# checkout at HEAD). COMMAND always runs from this checkout (the same client and in-process baseline for
# both), with $V (new|old) and $ROUND set.
# usage: [HYBRIDSEARCH_DATA_DIR=DIR] docs/perf/ab-trees.sh BASE 'COMMAND'     (ROUNDS=1 for one of each)
set -u
cd "$(dirname "$0")/../.."
BASE=$1; COMMAND=$2
NEW=$PWD; OLD=$PWD/var/ab-old
# the data dir both trees serve from: $HYBRIDSEARCH_DATA_DIR when set (collections indexed there), else var/
export HYBRIDSEARCH_DATA_DIR=${HYBRIDSEARCH_DATA_DIR:-$NEW/var}
if [ ! -d "$OLD/.git" ] && [ ! -f "$OLD/.git" ]; then
  git worktree add -f -q "$OLD" "$BASE"
fi
git -C "$OLD" checkout -q --detach "$BASE"
mkdir -p "$OLD/.shim" "$OLD/build/protos" && ln -sfn "$OLD/services" "$OLD/.shim/hybridsearch"
(cd "$OLD" && rm -rf build/protos && mkdir -p build/protos services/v1 && "$NEW/.venv/bin/python" -m grpc_tools.protoc -Iprotos \
  --python_out=build/protos --grpc_python_out=build/protos --pyi_out=build/protos protos/hybridsearch/v1/*.proto \
  && cp build/protos/hybridsearch/v1/*.py services/v1/ && touch services/v1/__init__.py)
stop() {  # this script's stack only (its pid file, its supervisord): never another one on the machine
  local pid=""
  if [ -f "$NEW/var/ab-serve.pid" ]; then pid=$(cat "$NEW/var/ab-serve.pid"); kill -TERM "$pid" 2>/dev/null; rm -f "$NEW/var/ab-serve.pid"; fi
  for _ in $(seq 1 60); do
    { [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; } || pgrep -f "$HYBRIDSEARCH_DATA_DIR/supervisor/supervisord.conf" >/dev/null || break
    sleep 1
  done
  # an older tree's launcher (no supervisord) that outlived its minute: its children die with it (PDEATHSIG)
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid" 2>/dev/null; sleep 2; fi
}
start() {  # $1: the tree to serve from
  rm -f "$NEW/var/ab-serve.log"
  # $! must be the launcher itself (stop() signals it): the old tree's subshell execs into it
  if [ "$1" = "$OLD" ]; then
    (cd "$OLD" && PYTHONPATH="$OLD/.shim" exec nohup "$NEW/.venv/bin/python" -m hybridsearch.cli serve all \
       > "$NEW/var/ab-serve.log" 2>&1) &
  else
    nohup "$NEW/.venv/bin/hybridsearch" serve all > "$NEW/var/ab-serve.log" 2>&1 &
  fi
  echo $! > "$NEW/var/ab-serve.pid"
  for _ in $(seq 1 180); do grep -q "stack is up" "$NEW/var/ab-serve.log" 2>/dev/null && return; sleep 1; done
  echo "the stack did not come up: var/ab-serve.log" >&2; exit 1
}
for ROUND in $(seq 1 "${ROUNDS:-2}"); do
  for V in new old; do
    stop
    if [ $V = old ]; then start "$OLD"; else start "$NEW"; fi
    V=$V ROUND=$ROUND bash -c "$COMMAND"
  done
done
stop
