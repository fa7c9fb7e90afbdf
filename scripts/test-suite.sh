#!/usr/bin/env bash
# `make test`'s body: the quality gate beside the rest of the suite.
#
# The gate (tests/quality) is CPU-bound: a fresh machine embeds its ~7,200 passages with MiniLM, ~12 minutes
# of both cores here. The rest of the suite waits on processes much of the time (stacks starting, kills,
# deadlines). So the gate runs at the same time at the lowest priority: it takes the cores the rest leaves
# idle and yields them at once to the rest's own work, whose timed checks keep the machine as they had it. The gate
# runs in a session of its own, so an interrupted `make test` stops it and its stack too. Its output
# follows the rest's; the exit status is the rest's, else the gate's.
# usage: scripts/test-suite.sh PYTHON
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${1:?usage: scripts/test-suite.sh PYTHON}
mkdir -p var
LOG=var/quality-gate.log
# SCHED_IDLE where the kernel allows it (chrt, util-linux): the gate runs only on a core nothing else wants and
# is preempted at once when the rest wakes (a nice 19 task can still hold a core for its slice, which parallel
# code such as llama.cpp's or onnxruntime's threads waiting at a barrier feels); nice 19 otherwise.
IDLE=(nice -n 19)
if chrt --idle 0 true 2>/dev/null; then IDLE=(chrt --idle 0 nice -n 19); fi
echo "== the quality gate runs beside the rest of the suite (${IDLE[*]}; its output: $LOG, printed at the end)"
setsid "${IDLE[@]}" "$PY" -m pytest -q -s --durations=5 tests/quality > "$LOG" 2>&1 &
gate=$!
trap 'kill -TERM -- -"$gate" 2>/dev/null; exit 130' INT TERM
"$PY" -m pytest -q --durations=25 tests --ignore=tests/faults --ignore=tests/quality
rest=$?
echo "== the rest of the suite exited $rest; waiting for the quality gate"
wait "$gate"
gate_rc=$?
cat "$LOG"
echo "== make test: the suite exited $rest, the quality gate $gate_rc"
[ "$rest" -eq 0 ] && [ "$gate_rc" -eq 0 ]
