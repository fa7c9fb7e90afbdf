#!/bin/bash
# uvloop under every service (session 22), whole stack, alternated twice (alternate.sh): `hybridsearch serve SERVICE`
# patched for the run only (uvloop.run(main()) in place of asyncio.run(main()) when XUV was set; uvloop 0.23.0;
# reverted after), per run three sequential modes (drive.py: 300 SciFact queries, the processes' CPU per answer) and a
# 15 s closed loop. Output: ../uvloop.txt
cd "$(dirname "$0")"
./alternate.sh XUV 'sleep 3
for m in bm25 fast balanced; do echo "uv=$V r$ROUND $(.venv/bin/python docs/perf/session-s38/experiments/drive.py $m 300)"; done
.venv/bin/hybridsearch loadtest closed --scenario fast,balanced --workers 4 --duration 15 --dataset ../shared/datasets/scifact \
  --out /tmp/cl-$V-$ROUND > /tmp/cl-$V-$ROUND.txt 2>&1
grep -E "answers/s|CPU per answer|p99" /tmp/cl-$V-$ROUND.txt | head -8 | sed "s/^/uv=$V r$ROUND /"'
