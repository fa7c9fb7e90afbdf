# uvloop under every service (session 22), whole stack, alternated twice: `hybridsearch serve SERVICE` patched for the run
# only (uvloop.run(main()) in place of asyncio.run(main()) when XUV was set; uvloop 0.23.0; reverted after), per run
# three sequential modes (drive.py: 300 SciFact queries, the processes' CPU per answer) and a 15 s closed loop.
# Output: ../uvloop.txt
source /tmp/benv.sh
cd /work/main
stop() { pkill -TERM -f "hybridsearch serve all"; for i in $(seq 60); do pgrep -f "$HYBRIDSEARCH_DATA_DIR/supervisor/supervisord.conf" >/dev/null || break; sleep 1; done; }
for r in 1 2; do for v in "" 1; do
  stop
  XUV=$v nohup .venv/bin/hybridsearch serve all > /tmp/serve.log 2>&1 &
  for i in $(seq 120); do grep -q "stack is up" /tmp/serve.log && break; sleep 1; done
  sleep 3
  for m in bm25 fast balanced; do echo "uv=$v r$r $(.venv/bin/python /tmp/drive.py $m 300)"; done
  .venv/bin/hybridsearch loadtest closed --scenario fast,balanced --workers 4 --duration 15 --dataset ../shared/datasets/scifact --out /tmp/cl-$v-$r > /tmp/cl-$v-$r.txt 2>&1
  grep -E "answers/s|CPU per answer|p99" /tmp/cl-$v-$r.txt | head -8 | sed "s/^/uv=$v r$r /"
done; done
stop
