#!/bin/bash
# The in-process A/B of this folder as it was run (docs/performance.md, issue 35, session 21): term_spans of this tree
# against 8b31a63's (a git worktree at var/ab-old, as docs/perf/ab-trees.sh makes it), 300 SciFact queries x 10 texts.
cd "$(dirname "$0")/../../.."
[ -d var/ab-old ] || git worktree add -f -q var/ab-old 8b31a63
.venv/bin/python docs/perf/previews-ab.py var/ab-old --rounds 6 > docs/perf/previews-s37/ab.txt 2>&1
