"""term_spans (the previews' highlight search, ~10% of the gateway's FAST samples) old against new in one
process, alternated, on SciFact's texts: 300 queries x 10 texts each (a page), CPU ms per page.
The old module is read from another tree (a git worktree of the base commit).

    .venv/bin/python docs/perf/previews-ab.py OLD_TREE [--rounds 6] [--data ../shared/datasets/scifact]
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import json
import random
import sys
import time
from pathlib import Path

from hybridsearch.bm25.analyzer import EnglishAnalyzer
from hybridsearch.config.settings import get_settings
from hybridsearch.gateway.query import previews as new


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("old_tree", type=Path)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--data", type=Path, default=Path("../shared/datasets/scifact"))
    args = parser.parse_args()
    spec = importlib.util.spec_from_file_location("old_previews", args.old_tree / "services/gateway/query/previews.py")
    old = importlib.util.module_from_spec(spec)
    sys.modules["old_previews"] = old  # dataclasses look their module up
    spec.loader.exec_module(old)
    settings = get_settings()
    analyzer = EnglishAnalyzer(settings.bm25.stemmer, settings.bm25.stopwords)
    with gzip.open(args.data / "corpus.jsonl.gz", "rt") as f:
        docs = [" ".join(json.loads(line)["text"].split()) for line in f]
    queries = [json.loads(line)["text"] for line in open(args.data / "queries.jsonl")][:300]
    random.seed(1)
    texts = random.sample(docs, 1000)
    pages = [(q, [texts[(i * 7 + j) % len(texts)] for j in range(10)]) for i, q in enumerate(queries)]

    def run(module) -> tuple[float, list]:
        t = time.process_time()
        out = [module.term_spans(text, module.query_terms(q, analyzer), analyzer) for q, page in pages for text in page]
        return (time.process_time() - t) / len(pages) * 1000, out

    reference = run(old)[1]
    assert run(new)[1] == reference, "the new term_spans highlights other words"
    ratios = []
    for r in range(args.rounds):
        n, o = run(new)[0], run(old)[0]
        ratios.append(n / o)
        print(f"round {r + 1}: new {n:.3f} ms, old {o:.3f} ms per page of 10, new/old {n / o:.2f}")
    print(f"new/old median {sorted(ratios)[len(ratios) // 2]:.2f}; spans identical on {len(reference)} texts")


if __name__ == "__main__":
    main()
