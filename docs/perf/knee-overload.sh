#!/bin/bash
# §2-§3 on a quiet machine against a running stack (`hybridsearch serve all`, SciFact indexed on first use):
#   1. the knees: open loop, Poisson arrivals, 15 s a step, a step passing with p99 <= 100 ms and < 1% errors
#      (FAST; BALANCED at 100 ms and at 200 ms; each ramp stops after two failed steps);
#   2. FAST at twice its knee for five minutes, every process's resident memory sampled (goals: goodput >= 90%
#      of the knee's, admitted p99 <= 2x the knee's, memory flat);
#   3. the burst of 40 concurrent FAST searches, 5 bursts 2 s apart, with 1 s and with 250 ms deadlines.
# Every load is bounded in count and time. Outputs (loadtest.json, PNGs, the printed tables) under OUT.
# usage: docs/perf/knee-overload.sh OUT      (STEP_S: seconds a ramp step, OVERLOAD_S: the overload's length)
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=$(realpath -m "${1:?usage: docs/perf/knee-overload.sh OUT}")
STEP_S=${STEP_S:-15}; OVERLOAD_S=${OVERLOAD_S:-300}
DATA=../shared/datasets/scifact
mkdir -p "$OUT"
lt() { .venv/bin/hybridsearch loadtest "$@"; }
knee() { .venv/bin/python -c "import json,sys; print(json.load(open(sys.argv[1]))['ramps'][sys.argv[2]]['knee_qps'] or 0)" "$@"; }

lt ramp -s fast --steps 5,10,15,20,25,30,35,40,45,50,60 --step-seconds "$STEP_S" --dataset $DATA \
  --out "$OUT/ramp-fast" > "$OUT/ramp-fast.txt" 2>&1
for limit in 100 200; do  # BALANCED at the issue's 100 ms, and at the 200 ms of its closed-loop goal
  lt ramp -s balanced --steps 2,4,6,8,10,12,15,18,21,25 --step-seconds "$STEP_S" --p99-limit-ms $limit \
    --dataset $DATA --out "$OUT/ramp-balanced-$limit" > "$OUT/ramp-balanced-$limit.txt" 2>&1
done
FAST_KNEE=$(knee "$OUT/ramp-fast/loadtest.json" fast)
echo "knees: fast $FAST_KNEE QPS (p99 <= 100 ms); balanced $(knee "$OUT/ramp-balanced-100/loadtest.json" balanced) QPS" \
  "(p99 <= 100 ms), $(knee "$OUT/ramp-balanced-200/loadtest.json" balanced) QPS (p99 <= 200 ms)" | tee "$OUT/knees.txt"

RATE=$(.venv/bin/python -c "print(2 * max(float('$FAST_KNEE'), 5.0))")
lt open -s fast --rate "$RATE" --duration "$OVERLOAD_S" --rss --dataset $DATA \
  --out "$OUT/overload-fast" > "$OUT/overload-fast.txt" 2>&1
for deadline in 1000 250; do
  lt burst -s fast --burst-size 40 --bursts 5 --burst-gap 2 --deadline-ms $deadline --warmup 10 --dataset $DATA \
    --out "$OUT/burst-$deadline" > "$OUT/burst-$deadline.txt" 2>&1
done
grep -h "knee\|goodput\|RESOURCE_EXHAUSTED" "$OUT"/*.txt | head -40
