"""A load report's outputs: the JSON file with every figure, the plots beside it, and the console tables."""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console
from rich.table import Table

from hybridsearch.tools.perf.cpu import ordered
from hybridsearch.tools.perf.load.plots import write_plots

REPORT_NAME = "loadtest.json"


def write_outputs(report: dict, out: Path) -> Path:
    """Plots into `out`, their names into the report, then the report as `out`/loadtest.json."""
    out.mkdir(parents=True, exist_ok=True)
    report["plots"] = [p.name for p in write_plots(report, out)]
    path = out / REPORT_NAME
    path.write_text(json.dumps(report, indent=1, default=str))
    return path


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _codes(codes: dict[str, int]) -> str:
    return " ".join(f"{code}:{n}" for code, n in codes.items() if code != "OK") or "-"


def runs_table(runs: list[dict]) -> Table:
    table = Table(title="runs (latency from the scheduled send, OK answers)")
    for column in ("run", "offered/s", "sent/s", "answers/s", "goodput/s", "p50", "p90", "p99", "p99.9", "max",
                   "errors", "dropped", "degraded"):
        table.add_column(column, justify="left" if column in ("run", "errors") else "right")
    for run in runs:
        latency = run["latency_ms"]
        offered = ("closed" if run["kind"] == "closed" else f"{run['bursts']} x {run['burst_size']} at once"
                   if run["kind"] == "burst" else f"{run['offered_qps']:g}")
        sent = f"{run['achieved_send_qps']:.1f}" + (" [red](client-limited)[/]" if run["client_limited"] else "")
        table.add_row(run["name"], offered, sent, f"{run['throughput_qps']:.1f}", f"{run['goodput_qps']:.1f}",
                      *(_ms(latency[p]) for p in ("p50", "p90", "p99", "p99.9", "max")),
                      _codes(run["codes"]), str(run["dropped_by_client"]), str(run["degraded"]))
    return table


def ramp_table(scenario: str, ramp: dict) -> Table:
    table = Table(title=f"ramp {scenario}: knee {ramp['knee_qps'] if ramp['knee_qps'] is not None else 'none'} QPS "
                        f"(p99 <= {ramp['p99_limit_ms']:g} ms, errors < {ramp['max_error_rate']:.1%}); "
                        f"stopped: {ramp['stopped_because']}")
    for column in ("offered/s", "sent/s", "answers/s", "goodput/s", "p50", "p99", "p99.9", "errors+drops", "pass"):
        table.add_column(column, justify="right")
    for row in ramp["table"]:
        table.add_row(f"{row['offered_qps']:g}", f"{row['achieved_send_qps']:.1f}", f"{row['throughput_qps']:.1f}",
                      f"{row['goodput_qps']:.1f}", _ms(row["p50_ms"]), _ms(row["p99_ms"]), _ms(row["p99.9_ms"]),
                      f"{row['error_rate']:.2%}", "yes" if row["passes"] else "[red]no[/]")
    return table


def mixed_table(scenario: str, mixed: dict) -> Table:
    deleted = mixed.get("documents_deleted", mixed.get("cleanup_error"))
    table = Table(title=f"{scenario}: queries without vs with {mixed['write_docs_per_s']:g} docs/s of writes "
                        f"({mixed['documents_sent']} documents sent, deleted afterwards: {deleted})")
    for column in ("", "without", "with", "change"):
        table.add_column(column, justify="right")
    for key, row in mixed["comparison"].items():
        table.add_row(key, *(str(row[k]) for k in ("without", "with", "change")))
    return table


def stages_table(stages: dict[str, dict[str, float]]) -> Table:
    table = Table(title="median ms per stage (the gateway's own timings; took_ms always, the rest with --stage-timings)")
    table.add_column("stage")
    for scenario in stages:
        table.add_column(scenario, justify="right")
    for stage in dict.fromkeys(s for per in stages.values() for s in per):
        table.add_row(stage, *(_ms(per.get(stage)) for per in stages.values()))
    return table


def _run_cpu(run: dict) -> dict[str, float]:
    """A run's CPU ms per OK answer (per answered request in reports from before that figure)."""
    return run.get("cpu_ms_per_answer") or run.get("cpu_ms_per_request") or {}


def cpu_table(runs: list[dict]) -> Table:
    """CPU milliseconds each measured process spent per OK answer, per run."""
    names = ordered(n for run in runs for n in _run_cpu(run))
    table = Table(title="CPU ms per answer (OK answers), per process (its CPU clock over the run)")
    table.add_column("run")
    for name in [*names, "total"]:
        table.add_column(name, justify="right")
    for run in runs:
        if cpu := _run_cpu(run):
            table.add_row(run["name"], *(_ms(cpu.get(n)) for n in names), _ms(sum(cpu.values())))
    return table


def cpu_headlines(report: dict) -> list[str]:
    """One line per scenario: its CPU per answer, per process and in all, against the baseline's if given."""
    cpu = report.get("cpu") or {}
    lines = [h["line"] for h in cpu.get("headlines", [])]
    if lines and cpu.get("baseline") is None:
        lines.append("(no baseline CPU: --baseline-from a `hybridsearch speed --json-out` file, or --baseline-cpu-ms)")
    return lines


def print_summary(report: dict, console: Console) -> None:
    if report["runs"]:
        console.print(runs_table(report["runs"]))
    for scenario, ramp in report["ramps"].items():
        console.print(ramp_table(scenario, ramp))
    for scenario, mixed in report["mixed"].items():
        console.print(mixed_table(scenario, mixed))
    for run in report["runs"]:
        if run["failed_legs"]:
            console.print(f"{run['name']}: failed legs {run['failed_legs']}")
    if any(_run_cpu(run) for run in report["runs"]):
        console.print(cpu_table(report["runs"]))
    if any(report["stages_median_ms"].values()):
        console.print(stages_table(report["stages_median_ms"]))
    for line in cpu_headlines(report):
        console.print(line, style="bold", markup=False, soft_wrap=True)
    if report["interrupted"]:
        console.print("[yellow]interrupted: the figures cover what ran before Ctrl-C[/]")
