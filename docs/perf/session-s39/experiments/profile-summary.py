"""py-spy raw samples summarised: each frame's share of the process's busy samples (cumulative) and the frames
where the samples landed (own), idle waits left out.
    .venv/bin/python docs/perf/session-s39/experiments/profile-summary.py RAW [TOP]"""
import collections
import sys

IDLE = ("select", "wait (threading")  # where an idle thread's stack ends; the metrics server's thread (serve_forever) is left out whole
cum, own, total = collections.Counter(), collections.Counter(), 0
for line in open(sys.argv[1]):
    stack, _, n = line.rstrip().rpartition(" ")
    frames = stack.split(";")
    if any(word in frames[-1] for word in IDLE) or "serve_forever" in stack:
        continue
    total += int(n)
    own[frames[-1]] += int(n)
    for frame in set(frames):
        cum[frame] += int(n)
top = int(sys.argv[2]) if len(sys.argv) > 2 else 40
print(f"{total} busy samples\ncumulative:")
for frame, n in cum.most_common(top):
    print(f"{100 * n / total:5.1f}%  {frame[:140]}")
print("own:")
for frame, n in own.most_common(top // 2):
    print(f"{100 * n / total:5.1f}%  {frame[:140]}")
