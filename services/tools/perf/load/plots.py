"""PNG plots of a load report (matplotlib, Agg backend, no display needed).

- latency_vs_load.png: p50/p99/p99.9 against offered load per ramp, goodput on the right axis, the p99
  limit and the knee marked;
- latency_over_time.png: per-second p50/p99 of every query run on the command's time axis, and below
  it the per-second errors and client drops (the writer's windows shaded);
- stage_breakdown.png: median ms of each stage the gateway reports, grouped by scenario;
- rss_over_time.png: resident memory of each sampled process.
Each is written only when the report has its data.
"""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
from matplotlib.figure import Figure  # noqa: E402  (after the backend is chosen)

DPI = 110
PERCENTILE_STYLES = (("p50_ms", ":"), ("p99_ms", "-"), ("p99.9_ms", "--"))


def _values(rows: list[dict], key: str) -> list[float]:
    return [math.nan if r.get(key) is None else r[key] for r in rows]


def _colors(names: list[str]) -> dict[str, str]:
    return {name: f"C{i % 10}" for i, name in enumerate(dict.fromkeys(names))}


def _save(fig: Figure, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    return path


def latency_vs_load(ramps: dict[str, dict], path: Path) -> Path:
    fig = Figure(figsize=(9, 5.5))
    ax = fig.add_subplot()
    goodput_ax = ax.twinx()
    colors = _colors(list(ramps))
    limit = None
    for scenario, ramp in ramps.items():
        rows, color = ramp["table"], colors[scenario]
        offered = [r["offered_qps"] for r in rows]
        for key, style in PERCENTILE_STYLES:
            ax.plot(offered, _values(rows, key), style, color=color, marker="o", ms=3, label=f"{scenario} {key[:-3]}")
        goodput_ax.plot(offered, _values(rows, "goodput_qps"), color=color, alpha=0.35, lw=4,
                        label=f"{scenario} goodput")
        if ramp["knee_qps"] is not None:
            ax.axvline(ramp["knee_qps"], color=color, lw=0.8, ls="-.", label=f"{scenario} knee {ramp['knee_qps']:g} QPS")
        limit = ramp["p99_limit_ms"]
    if limit is not None:
        ax.axhline(limit, color="red", lw=0.8, label=f"p99 limit {limit:g} ms")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("offered load (QPS)")
    ax.set_ylabel("latency from scheduled send (ms)")
    goodput_ax.set_ylabel("goodput (OK within deadline, /s)")
    lines, labels = ax.get_legend_handles_labels()
    more, more_labels = goodput_ax.get_legend_handles_labels()
    ax.legend(lines + more, labels + more_labels, fontsize=7, loc="upper left")
    ax.set_title("latency vs offered load (open loop)")
    return _save(fig, path)


def latency_over_time(runs: list[dict], path: Path) -> Path:
    fig = Figure(figsize=(10, 6.5))
    top, bottom = fig.subplots(2, 1, sharex=True, height_ratios=[3, 1.4])
    query_runs = [r for r in runs if r["kind"] != "writes"]
    colors = _colors([r["scenario"] for r in query_runs])
    labelled: set[str] = set()
    for run in query_runs:
        rows, color = run["timeseries"], colors[run["scenario"]]
        t = [run["start_offset_s"] + row["t"] + 0.5 for row in rows]
        for key, style in PERCENTILE_STYLES[:2]:
            label = f"{run['scenario']} {key[:-3]}"
            top.plot(t, _values(rows, key), style, color=color, marker=".", ms=3,
                     label=None if label in labelled else label)
            labelled.add(label)
        bottom.bar(t, [row["errors"] for row in rows], width=0.9, color=color, alpha=0.8)
        bottom.bar(t, [row["dropped"] for row in rows], width=0.9, bottom=[row["errors"] for row in rows],
                   color=color, alpha=0.3, hatch="//")
    writes = [r for r in runs if r["kind"] == "writes"]
    for run in writes:
        for ax in (top, bottom):
            ax.axvspan(run["start_offset_s"], run["start_offset_s"] + run["window_s"], color="grey", alpha=0.12)
    top.set_yscale("log")
    top.set_ylabel("per-second latency (ms)")
    top.legend(fontsize=7, loc="upper left")
    top.set_title("latency over time" + (" (grey: writer on)" if writes else ""))
    bottom.set_ylabel("errors / drops per s")
    bottom.set_xlabel("seconds since the command started")
    return _save(fig, path)


def stage_breakdown(stages: dict[str, dict[str, float]], path: Path) -> Path:
    names = list(dict.fromkeys(stage for per in stages.values() for stage in per))
    fig = Figure(figsize=(9, max(3.0, 0.45 * len(names) * max(1, len(stages)) ** 0.5 + 1.5)))
    ax = fig.add_subplot()
    height = 0.8 / max(1, len(stages))
    for i, (scenario, per) in enumerate(stages.items()):
        ys = [j + i * height for j in range(len(names))]
        ax.barh(ys, [per.get(stage, 0.0) for stage in names], height=height, label=scenario)
    ax.set_yticks([j + 0.4 - height / 2 for j in range(len(names))], names, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("median ms per answer")
    ax.legend(fontsize=8)
    ax.set_title("stage breakdown (the gateway's own timings)")
    return _save(fig, path)


def rss_over_time(rss: dict, path: Path) -> Path:
    fig = Figure(figsize=(9, 4.5))
    ax = fig.add_subplot()
    names = list(dict.fromkeys(name for sample in rss["series"] for name in sample["rss_mb"]))
    t = [sample["t"] for sample in rss["series"]]
    for name in names:
        ax.plot(t, [sample["rss_mb"].get(name, math.nan) for sample in rss["series"]], label=name)
    ax.set_xlabel("seconds since the command started")
    ax.set_ylabel("resident memory (MiB)")
    ax.legend(fontsize=8, loc="upper left")
    ax.set_title("resident memory over time")
    return _save(fig, path)


def write_plots(report: dict, out: Path) -> list[Path]:
    """Every plot the report has data for, as PNGs under `out`."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    if report["ramps"]:
        written.append(latency_vs_load(report["ramps"], out / "latency_vs_load.png"))
    if report["runs"]:
        written.append(latency_over_time(report["runs"], out / "latency_over_time.png"))
    if any(report["stages_median_ms"].values()):
        written.append(stage_breakdown(report["stages_median_ms"], out / "stage_breakdown.png"))
    if report.get("rss") and report["rss"]["series"]:
        written.append(rss_over_time(report["rss"], out / "rss_over_time.png"))
    return written
