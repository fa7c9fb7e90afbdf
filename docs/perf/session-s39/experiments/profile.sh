#!/bin/bash
# Where a FAST answer's CPU goes in each process (session 23): py-spy (pip install py-spy) on the gateway, BM25 and
# vector processes of the running stack while docs/perf/session-s38/experiments/drive.py asks 1,200 FAST queries
# back to back; profile-summary.py on each. Run with the bench environment exported and the stack up.
# Output: profile-fast.txt here.
cd "$(dirname "$0")/../../../.."
HERE=docs/perf/session-s39/experiments; RAW=$(mktemp -d)
for S in gateway bm25 vector; do
  py-spy record -p "$(pgrep -f "hybridsearch.cli serve $S\$")" -r 500 -f raw -o $RAW/$S.raw -d 30 --nonblocking > /dev/null 2>&1 &
done
sleep 1; .venv/bin/python docs/perf/session-s38/experiments/drive.py fast 1200 > $HERE/profile-fast.txt; wait
for S in gateway bm25 vector; do echo "== $S"; .venv/bin/python $HERE/profile-summary.py $RAW/$S.raw 60; done >> $HERE/profile-fast.txt
