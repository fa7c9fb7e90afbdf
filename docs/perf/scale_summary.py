"""One scale run's figures (docs/perf/scale-static.sh) gathered into one JSON: python3 scale_summary.py DIR SIZE.
Whatever a run did not reach is null, with the reason under "missing"."""

import json
import os
import re
import sys
from pathlib import Path

out, size = Path(sys.argv[1]), sys.argv[2]
missing = []


def load(name, optional=False):
    path = out / name
    if not path.exists():
        if not optional:
            missing.append(name)
        return None
    return json.loads(path.read_text())


def text(name):
    path = out / name
    return path.read_text() if path.exists() else ""


def peak(rss, name):
    return max((s["rss_mb"].get(name, 0.0) for s in rss["series"]), default=None) if rss else None


summary = {"size": size, "embedder": "static-minilm (model2vec) vectors, 256 dimensions",
           "note": os.environ.get("NOTE", "two shared cores: other engineers' tests ran on the machine during the run"),
           "embedding": load("embedding.json")}
index = re.search(r"(\d+) documents: .* (\d+) chunks in ([\d.]+) s \((\d+) documents/s\)", text("index.txt"))
summary["index"] = ({"documents": int(index[1]), "chunks": int(index[2]), "seconds": float(index[3]),
                     "docs_per_s": int(index[4])} if index else None)
builds = re.findall(r"\((\d+) points written since the last build\) in ([\d.]+)s", text("hnsw.txt"))
summary["hnsw_builds"] = [{"points": int(p), "seconds": float(s)} for p, s in builds]
closed = load("closed1/loadtest.json")
if closed:
    run = closed["runs"][0]
    summary["fast_1_worker"] = {"p50_ms": run["latency_ms"]["p50"], "p99_ms": run["latency_ms"]["p99"],
                                "answers_per_s": run["throughput_qps"], "errors": run["errors"],
                                "failed_legs": run["failed_legs"], "cpu_ms_per_request": run.get("cpu_ms_per_request")}
    summary["rss_peak_mib"] = {name: peak(closed.get("rss"), name) for name in ("vector", "bm25", "gateway", "fusion")}
mixed = load("mixed/loadtest.json")
if mixed:
    cmp = mixed["mixed"]["fast"]["comparison"]
    writes = next(r for r in mixed["runs"] if r["name"].endswith("writes") and "+" not in r["name"])
    summary["under_writes"] = {"write_docs_per_s": mixed["mixed"]["fast"]["write_docs_per_s"],
                               "p99_alone_ms": cmp["p99_ms"]["without"], "p99_with_writes_ms": cmp["p99_ms"]["with"],
                               "p99_ratio": round(cmp["p99_ms"]["with"] / cmp["p99_ms"]["without"], 2),
                               "error_rate_with": cmp["error_rate"]["with"],
                               "upsert_p50_ms": writes["latency_ms"]["p50"], "upsert_p99_ms": writes["latency_ms"]["p99"]}
    summary["rss_peak_mib_under_writes"] = {name: peak(mixed.get("rss"), name) for name in ("vector", "bm25")}
summary["visibility"] = load("visibility.json")
# A corpus loaded in-process instead of through the gateway (scale-static.sh's header): each store's own tool.
summary["vector_scale"] = load("vector-scale.json", optional=True)
summary["bm25_scale"] = load("bm25-scale.json", optional=True)
summary["probe"] = load("probe.json")
summary["missing"] = missing
print(json.dumps(summary, indent=2))
