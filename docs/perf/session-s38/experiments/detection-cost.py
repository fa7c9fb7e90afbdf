"""Language detection's cost on SciFact's queries (session 22): lingua's confidence values as text/language.py asks them.
    .venv/bin/python docs/perf/session-s38/experiments/detection-cost.py"""
import json, time
from hybridsearch.text.language import DETECTOR
qs=[json.loads(l)["text"] for l in open("../shared/datasets/scifact/queries.jsonl")]
DETECTOR.warm()
for r in range(3):
    t=time.process_time(); [DETECTOR.best(q) for q in qs]; print(f"{(time.process_time()-t)/len(qs)*1000:.3f} ms CPU a query")
