# One A/B run of docs/performance.md §0.4 (queries while documents are written, a commit per write vs group
# commit), run by: docs/perf/ab.sh 3752bb4 'bash docs/perf/ab-mixed/run.sh' services/bm25/tantivy_engine.py
# ($V = new|old, $ROUND = 1|2; summary: the table in §0.4, from the loadtest.json files copied here).
mkdir -p /tmp/ab-mixed
for b in 1 10; do
  .venv/bin/hybridsearch loadtest mixed --rate 25 --duration 30 --write-rate 100 --write-batch $b \
    --write-corpus ../shared/datasets/scifact --scenario fast --dataset ../shared/datasets/scifact \
    --out /tmp/ab-mixed/$V-$ROUND-b$b > /tmp/ab-mixed/$V-$ROUND-b$b.txt 2>&1
  cp /tmp/ab-mixed/$V-$ROUND-b$b/loadtest.json docs/perf/ab-mixed/$V-$ROUND-b$b.json
done
