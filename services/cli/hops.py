"""Developer tools for the cost of a hop: `hop-cost` (a bare gRPC call of a leg answer's size) and `hops` (every
internal RPC of a search against its engine and a bare echo of its sizes: the hop table, docs/performance.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.markup import escape

from hybridsearch.cli.base import TOOLS, app, console, tool_imports
from hybridsearch.config.settings import get_settings


@app.command("hop-cost", rich_help_panel=TOOLS)
def hop_cost(
    calls: Annotated[int, typer.Option(min=100, max=20000, help="sequential calls per answer size")] = 2000,
    hits: Annotated[str, typer.Option(help="comma list of answer sizes, in leg hits with their texts")] = "0,10,100",
    json_out: Annotated[Optional[Path], typer.Option(help="write the figures here as JSON")] = None,
):
    """The floor of one hop: CPU of a bare grpc.aio unary call over loopback, client and server apart."""
    from rich.table import Table

    from hybridsearch.tools.perf.hop import as_dict, measure

    try:
        sizes = [int(h) for h in hits.split(",") if h.strip()]
    except ValueError:
        console.print(f"[red]--hits takes numbers: {escape(hits)}[/]")
        raise typer.Exit(2) from None
    costs = [measure(h, calls) for h in sizes]
    table = Table("hits", "answer bytes", "client CPU ms", "server CPU ms", "CPU ms a hop", "wall ms",
                  title=f"one bare unary hop over loopback, {calls} sequential calls")
    for c in costs:
        table.add_row(str(c.hits), str(c.answer_bytes), f"{c.client_cpu_ms:.3f}", f"{c.server_cpu_ms:.3f}",
                      f"{c.cpu_ms:.3f}", f"{c.wall_ms:.3f}")
    Console().print(table)
    if json_out is not None:
        json_out.write_text(json.dumps([as_dict(c) for c in costs], indent=1))


@app.command("hops", rich_help_panel=TOOLS)
def hops(
    folder: Annotated[Path, typer.Argument(help="BEIR-layout folder: its first judged queries are searched")],
    collection: Annotated[str, typer.Option("--collection", "-c", help="a collection holding the corpus "
                                            "(default: its bench collection, as `bench` and `speed` name it)")] = "",
    modes: Annotated[str, typer.Option(help="comma list of bm25,vector,fast,balanced")] = "fast,balanced",
    queries: Annotated[int, typer.Option(min=1, max=300, help="judged queries whose internal calls are recorded")] = 30,
    calls: Annotated[int, typer.Option(min=50, max=20000, help="replayed calls per RPC (and echo calls)")] = 300,
    json_out: Annotated[Optional[Path], typer.Option(help="write the rows here as JSON")] = None,
):
    """The hop table: every internal RPC the gateway makes for these modes, recorded from real searches, replayed
    one at a time; its CPU on both sides, its engine's own time, and a bare echo of the same message sizes.
    Runs against the stack of these settings (`hybridsearch serve all`); the collection must be indexed."""
    with tool_imports("hops"):
        from hybridsearch.corpus import load_judged_queries
        from hybridsearch.tools.bench import collection_name
        from hybridsearch.tools.perf.hops import hop_table, markdown
        from hybridsearch.tools.perf.speed import SPEED_MODES

    settings = get_settings()
    wanted = [m.strip() for m in modes.split(",") if m.strip()]
    if unknown := [m for m in wanted if m not in SPEED_MODES]:
        console.print(f"[red]unknown modes {escape(str(unknown))}: choose from {', '.join(SPEED_MODES)}[/]")
        raise typer.Exit(2)
    judged, _ = load_judged_queries(folder, queries)
    rows = hop_table(settings, list(judged.values()), collection or collection_name(folder, settings), wanted, calls)
    console.print(markdown(rows, wanted), soft_wrap=True)
    if json_out is not None:
        json_out.write_text(json.dumps([r.as_dict() for r in rows], indent=1))
