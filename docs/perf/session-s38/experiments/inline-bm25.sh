#!/bin/bash
# BM25 search on the event loop against the worker thread (session 22), whole stack, alternated twice (alternate.sh):
# the BM25 service patched for the run only (TantivyBm25Engine.search returned self._collection(collection).search(...)
# directly when os.environ["XINLINE"] was set; reverted after), then docs/perf/bm25-only-split.py.
# Output: ../inline-bm25.txt
cd "$(dirname "$0")"
./alternate.sh XINLINE 'echo "inline=$V r$ROUND: $(.venv/bin/python docs/perf/bm25-only-split.py bench-scifact-8c1bc262 --queries 600 2>&1 | grep through)"'
