"""The stage-by-stage CPU budget: each process's py-spy samples (perf.flame) folded into named buckets,
and each bucket's share of the samples times the process's CPU per answer (from /proc, the same run).

A stack goes to the first bucket of BUCKETS, in table order, with a pattern found in one of its frames
(`func (file:line)` as py-spy writes them; a substring match, the file path as short as py-spy makes it,
so `gateway/query/paging.py` matches a checkout and an installed package alike). A pattern that starts with
`leaf:` only matches the innermost frame: for wrappers every call runs through (the metrics interceptor,
the event loop), which own the sample only when nothing inside them is running. Stacks no pattern
matches are `other`; the innermost frames that fill it most are listed, to grow the table from.

Caveats, measured ones aside: py-spy sees Python frames only (without --native, which would pause the
services), so C work a Python frame calls (protobuf's upb, onnxruntime) is the caller's; the gRPC aio
server's own work (its Cython, the response's serialisation) shows as the event loop's frames and lands
in `send/recv and gRPC core`; threads with no Python frames are not sampled, and a thread py-spy takes for
active is sampled whether or not it has a core (runnable and waiting on a busy machine, or in a C call it
does not know as idle). `sampled_over_cpu` (samples / rate over the process's CPU in the window) shows
both: well under 1, CPU the samples do not see; over 1, samples that were not CPU. The shares are the
method's assumption: that both spread over the buckets as the CPU does.

`python -m hybridsearch.tools.perf.budget DIR` folds a `loadtest closed --profile DIR` again (a changed table).
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path

from rich.console import Console
from rich.table import Table

from hybridsearch.tools.perf.cpu import ordered
from hybridsearch.tools.perf.flame import COLLAPSED, PROFILE_NAME, read_collapsed

LEAF = "leaf:"
OTHER = "other"
BUDGET_NAME = "budget.json"

# bucket -> patterns, the first bucket with a match wins: the specific costs (wire formats, the embedding,
# the observability wrappers) before the stages that call them, the event loop last. (parse before serialise:
# "deserialize (grpc/..." contains "serialize (grpc/...".)
BUCKETS: dict[str, list[str]] = {
    "parse": ["deserialize (grpc/_common.py", "guarded_decoder", "FromString", "ParseFromString", "MergeFromString"],
    "serialise": ["serialize (grpc/_common.py", "SerializeToString", "MessageToDict", "MessageToJson"],
    "embedding": ["vector/embedder.py", "vector/e5.py", "QueryEncoder", "onnxruntime", "tokenizers"],
    "query vector cache": ["vector/query_cache.py"],  # its lookups and writes; the model runs under it are embedding
    "tracing": ["opentelemetry", "trace/__init__.py", "_AgnosticContextManager", "contextvars_context.py",
                "context/__init__.py", "runtime/telemetry.py"],
    "metrics": ["prometheus_client", "leaf:runtime/metrics.py", "leaf:gateway/query/observed.py"],
    "previews": ["gateway/query/previews.py", "gateway/query/texts.py"],
    "calibration": ["gateway/query/calibration.py"],
    "paging": ["gateway/query/paging.py", "gateway/query/next_page.py"],
    "fusion": ["fusion/", "gateway/query/fuse.py"],
    "circuit breakers": ["purgatory/", "gateway/breakers.py"],
    "engine": ["bm25/tantivy_engine.py", "bm25/tantivy_collection.py", "bm25/engine.py", "bm25/embedded.py", "bm25/analyzer.py", "bm25/fuzzy.py",
               "bm25/opensearch.py", "bm25s/", "tantivy", "vector/edge.py", "vector/store.py", "vector/engine.py",
               "vector/neighbours.py", "VectorEngine.", "qdrant", "expansion/prf.py", "expansion/llm.py",
               "expansion/cache.py", "expansion/signals.py", "redis/"],
    "send/recv and gRPC core": ["grpc/", "leaf:asyncio/", "leaf:selectors.py", "leaf:concurrent/futures/",
                                "leaf:threading.py", "leaf:contract/wire.py"],
}


def bucket_of(stack: Sequence[str], table: Mapping[str, Sequence[str]] = BUCKETS) -> str:
    """The bucket of one stack (root first): see the module's doc."""
    for bucket, patterns in table.items():
        for pattern in patterns:
            if pattern.startswith(LEAF):
                if stack and pattern[len(LEAF):] in stack[-1]:
                    return bucket
            elif any(pattern in frame for frame in stack):
                return bucket
    return OTHER


def fold(stacks: Mapping[tuple[str, ...], int], table: Mapping[str, Sequence[str]] = BUCKETS
         ) -> tuple[Counter[str], Counter[str]]:
    """Samples per bucket, and per innermost frame of the stacks that went to `other`."""
    buckets: Counter[str] = Counter()
    other: Counter[str] = Counter()
    for stack, samples in stacks.items():
        bucket = bucket_of(stack, table)
        buckets[bucket] += samples
        if bucket == OTHER and stack:
            other[stack[-1]] += samples
    return buckets, other


def process_budget(stacks: Mapping[tuple[str, ...], int], cpu_ms_per_answer: float | None, rate: float,
                   cpu_ms_in_window: float | None, table: Mapping[str, Sequence[str]] = BUCKETS) -> dict:
    """One process: samples and CPU ms per answer per bucket (share of samples x CPU per answer), and the
    samples / rate against the process's CPU over the sampling window (`sampled_over_cpu`)."""
    buckets, other = fold(stacks, table)
    samples = sum(buckets.values())
    order = [b for b in [*table, OTHER] if buckets[b]]
    ms = ({b: round(buckets[b] / samples * cpu_ms_per_answer, 3) for b in order}
          if samples and cpu_ms_per_answer is not None else {})
    sampled_ms = samples / rate * 1000 if rate else 0.0
    return {"samples": samples, "samples_per_bucket": {b: buckets[b] for b in order}, "cpu_ms_per_answer": cpu_ms_per_answer,
            "ms_per_answer": ms,
            "sampled_over_cpu": round(sampled_ms / cpu_ms_in_window, 3) if cpu_ms_in_window else None,
            "other_top_frames": dict(other.most_common(8))}


def budget_of_folder(folder: Path, table: Mapping[str, Sequence[str]] = BUCKETS) -> dict:
    """Every profiled process of a `--profile` folder (profile.json, NAME.collapsed) folded."""
    profile = json.loads((folder / PROFILE_NAME).read_text())
    processes = {}
    for name in ordered(profile["processes"]):
        path = folder / f"{name}{COLLAPSED}"
        if path.is_file():
            processes[name] = process_budget(read_collapsed(path.read_text()), profile["cpu_ms_per_answer"].get(name),
                                             profile["rate"], profile["cpu_ms_in_window"].get(name), table)
    return {"run": profile.get("run"), "answers": profile.get("answers"), "rate": profile["rate"],
            "buckets": [*table, OTHER], "processes": processes}


def budget_table(budget: dict) -> Table:
    """Buckets down, processes across, CPU ms per answer in each cell; the totals and sampling below."""
    processes = budget["processes"]
    table = Table(title=f"CPU ms per answer by stage ({budget['run']}: py-spy samples' shares x /proc CPU per answer)")
    table.add_column("bucket")
    for name in [*processes, "all"]:
        table.add_column(name, justify="right")
    for bucket in budget["buckets"]:
        cells = [p["ms_per_answer"].get(bucket) for p in processes.values()]
        if any(cells):
            table.add_row(bucket, *(_ms(c) for c in cells), _ms(sum(c or 0.0 for c in cells)))
    table.add_section()
    table.add_row("CPU ms / answer", *(_ms(p["cpu_ms_per_answer"]) for p in processes.values()),
                  _ms(sum(p["cpu_ms_per_answer"] or 0.0 for p in processes.values())))
    table.add_row("samples", *(str(p["samples"]) for p in processes.values()), "")
    table.add_row("sampled s / CPU s", *("-" if p["sampled_over_cpu"] is None else f"{p['sampled_over_cpu']:.2f}"
                                          for p in processes.values()), "")
    return table


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Fold a `loadtest closed --profile DIR` folder into the CPU budget.")
    parser.add_argument("folder", type=Path)
    args = parser.parse_args(argv)
    budget = budget_of_folder(args.folder)
    (args.folder / BUDGET_NAME).write_text(json.dumps(budget, indent=1))
    console = Console()
    console.print(budget_table(budget))
    for name, process in budget["processes"].items():
        if process["other_top_frames"]:
            console.print(f"{name}, most of 'other': " + "; ".join(f"{f} {n}" for f, n in process["other_top_frames"].items()),
                          soft_wrap=True, markup=False)


if __name__ == "__main__":
    main()
