# BM25 search on the event loop against the worker thread (session 22), whole stack, alternated twice: each run starts the
# stack with XINLINE set or not, the BM25 service patched for the run only (TantivyBm25Engine.search returned
# self._collection(collection).search(...) directly when os.environ["XINLINE"] was set; reverted after), then
# docs/perf/bm25-only-split.py. Output: ../inline-bm25.txt
source /tmp/benv.sh
cd /work/main
stop() { pkill -TERM -f "hybridsearch serve all"; for i in $(seq 60); do pgrep -f "$HYBRIDSEARCH_DATA_DIR/supervisor/supervisord.conf" >/dev/null || break; sleep 1; done; }
for r in 1 2; do for v in "" 1; do
  stop
  XINLINE=$v nohup .venv/bin/hybridsearch serve all > /tmp/serve.log 2>&1 &
  for i in $(seq 120); do grep -q "stack is up" /tmp/serve.log && break; sleep 1; done
  echo "inline=$v r$r: $(.venv/bin/python docs/perf/bm25-only-split.py bench-scifact-8c1bc262 --queries 600 2>&1 | grep through)"
done; done
stop
