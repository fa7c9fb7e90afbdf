"""Developer tools for quality: bench through the gateway, the lever table, tuning, reports, reranker training.
Their heavy modules are imported inside each command, under tool_imports (the `tools` extra)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.table import Table

from hybridsearch.cli.base import TOOLS, app, console, gateway_client, progress_bar, tool_imports
from hybridsearch.config.settings import get_settings


@app.command(rich_help_panel=TOOLS)
def bench(
    folder: Annotated[Path, typer.Argument(exists=True, file_okay=False, help="BEIR-layout folder")],
    modes: Annotated[str, typer.Option(help="comma list of bm25,vector,hybrid,expansion,rerank,default")] = "bm25,vector,hybrid,default",
    as_json: Annotated[bool, typer.Option("--json")] = False,
    ignore_identical: Annotated[Optional[bool], typer.Option("--ignore-identical/--keep-identical",
                                help="drop a hit whose id equals the query id (default: on for arguana)")] = None,
    start: Annotated[Optional[bool], typer.Option("--start/--no-start", help="start a stack when none is running")] = None,
    limit: Annotated[int, typer.Option(help="only the first N judged queries (0 = all)")] = 0,
    typos: Annotated[Optional[int], typer.Option(help="typo the queries with this seed (quality/typos.py)")] = None,
    typo_rate: Annotated[float, typer.Option(help="with --typos: the share of words of 4+ letters hit")] = 0.3,
    fuzzy: Annotated[Optional[bool], typer.Option("--fuzzy/--no-fuzzy",
                     help="typo tolerance in the BM25 leg (default: the collection's setting)")] = None,
    calibration: Annotated[bool, typer.Option(help="also pool every returned hit's score and blended_score with "
                                                   "its judgment: ROC AUC, AP, precision above min_score (JSON)")] = False,
    unanswerable: Annotated[Optional[Path], typer.Option(exists=True, file_okay=False,
                            help="with --calibration: this BEIR folder's judged queries (another domain) run too, "
                                 "every hit irrelevant, pooled in a second set of figures")] = None,
    collection: Annotated[Optional[str], typer.Option("--collection", "-c", help="the collection to bench (indexed "
                          "from the folder unless it holds exactly its corpus); default: bench-<dataset>-<hash of "
                          "the index-time settings>")] = None,
):
    """Bench nDCG@10, Recall@100, MRR@10 and latency per mode on a BEIR-layout folder."""
    with tool_imports("bench"):
        from hybridsearch.tools.bench import BENCH_MODES, collection_name, ensure_indexed, run_mode
        from hybridsearch.corpus import ignores_identical_ids, load_judged_queries
        from hybridsearch.launcher import Stack, grpc_healthy

    wanted = [m.strip() for m in modes.split(",") if m.strip()]
    unknown = [m for m in wanted if m not in BENCH_MODES]
    if unknown:
        raise typer.BadParameter(f"unknown modes {unknown}: choose from {', '.join(BENCH_MODES)}")
    ignore = ignore_identical if ignore_identical is not None else ignores_identical_ids(folder)
    settings = get_settings()
    stack = None
    if not grpc_healthy(settings.endpoints.addr("gateway")):
        if start is False:
            console.print("[red]no gateway running[/] (hybridsearch serve all)")
            raise typer.Exit(2)
        console.print("starting a stack for this bench…")
        stack = Stack(settings).start()
    try:
        client = gateway_client()
        collection = collection or collection_name(folder, settings)
        queries, qrels = load_judged_queries(folder, limit)
        off_domain = None
        if unanswerable is not None:
            off_domain = load_judged_queries(unanswerable, limit)[0]
        if typos is not None:
            from hybridsearch.tools.quality.typos import typo_queries

            queries = typo_queries(queries, typos, typo_rate)
        with progress_bar() as progress:
            task = progress.add_task(f"indexing {folder.name}", total=None)
            ensure_indexed(client, folder, collection, progress=lambda n: progress.advance(task, n))
            results = {}
            for mode in wanted:
                t = progress.add_task(f"{mode:>9}", total=len(queries) + len(off_domain or {}) * calibration)
                results[mode] = run_mode(client, BENCH_MODES[mode], queries, qrels, collection, ignore,
                                         progress=lambda t=t: progress.advance(t), fuzzy=fuzzy,
                                         calibration=calibration, unanswerable=off_domain)
    finally:
        if stack is not None:
            stack.stop()
    report = {"dataset": folder.resolve().name, "collection": collection, "ignore_identical_ids": ignore, "modes": results,
              "typos": typos, "typo_rate": typo_rate if typos is not None else None, "fuzzy": fuzzy}
    if as_json:
        print(json.dumps(report, indent=2))
        return
    table = Table(title=f"{folder.resolve().name} ({len(queries)} judged queries)")
    for col in ("mode", "nDCG@10", "Recall@100", "MRR@10", "p50 ms", "p95 ms"):
        table.add_column(col, justify="right")
    for mode, r in results.items():
        table.add_row(mode, f"{r['ndcg@10']:.4f}", f"{r['recall@100']:.4f}", f"{r['mrr@10']:.4f}", f"{r['p50_ms']:.1f}", f"{r['p95_ms']:.1f}")
    Console().print(table)


@app.command("bench-report", rich_help_panel=TOOLS)
def bench_report(
    files: Annotated[list[Path], typer.Argument(exists=True, dir_okay=False, help="`hybridsearch bench --json` outputs")],
    out: Annotated[Optional[Path], typer.Option(help="write the table here (between <!-- bench:start/end -->)")] = None,
    metric: str = "ndcg@10",
    marker: str = "bench",
):
    """A markdown table (collection × mode) from saved bench results."""
    with tool_imports("bench-report"):
        from hybridsearch.tools.bench import to_markdown

    _publish(to_markdown([json.loads(f.read_text()) for f in files], metric), out, marker)


@app.command(rich_help_panel=TOOLS)
def levers(
    folders: Annotated[list[Path], typer.Argument(exists=True, file_okay=False, help="BEIR-layout folders")],
    out: Annotated[Optional[Path], typer.Option(help="write the markdown table here")] = None,
    json_out: Annotated[Optional[Path], typer.Option("--json-out", help="write every metric as JSON here")] = None,
    dense: Annotated[bool, typer.Option(help="also the levers that re-embed the corpus (slow)")] = False,
    groups: Annotated[str, typer.Option(help="comma list of bm25,vector,fusion,expansion ('' = all)")] = "",
):
    """The lever table: every quality lever over every collection, in process (embeddings cached)."""
    with tool_imports("levers"):
        from hybridsearch.tools.quality.sweep import run_table, to_markdown

    settings = get_settings()

    def progress(name, label, scores, seconds):
        console.print(f"{name:10s} {scores['ndcg@10']:.4f}  {label}  [dim]{seconds:.1f}s[/]")

    table = run_table(folders, settings, settings.data_dir / "cache", dense,
                      set(groups.split(",")) if groups else None, progress)
    _publish(to_markdown(table), out, "levers", table, json_out)


@app.command(rich_help_panel=TOOLS)
def tune(
    folders: Annotated[Optional[list[Path]], typer.Argument(exists=True, file_okay=False, help="BEIR-layout folders")] = None,
    out: Annotated[Optional[Path], typer.Option(help="write the ranking here (markdown)")] = None,
    json_out: Annotated[Optional[Path], typer.Option("--json-out", help="every combination's figures as JSON")] = None,
    top: int = 15,
    merge: Annotated[Optional[list[Path]], typer.Option(help="merge earlier --json-out files instead of running")] = None,
    grid: Annotated[str, typer.Option(help="base (BM25 × fusion × feedback), joint (title boost × vector passages × "
                                           "fusion weights × feedback × long-query fusion) or mpnet (all-mpnet-base-v2 "
                                           "as the bi-encoder × title boost × fusion × feedback × long-query fusion)")] = "base",
):
    """Rank combinations of levers by their worst margin over the best competing design per collection."""
    with tool_imports("tune"):
        from hybridsearch.tools.quality.tune import GRIDS, merge as merge_tables, run_tuning, to_markdown

    settings = get_settings()
    if merge:
        table = merge_tables([json.loads(f.read_text()) for f in merge])
    else:
        if grid not in GRIDS:
            raise typer.BadParameter(f"choose from {', '.join(GRIDS)}", param_hint="--grid")
        table = run_tuning(folders, settings, settings.data_dir / "cache",
                           lambda name, bar: console.print(f"{name}: bar {bar:.4f} done"), grid)
    _publish(to_markdown(table, top), out, "tune", table, json_out)


def _publish(markdown: str, out: Path | None, marker: str, table: dict | None = None, json_out: Path | None = None) -> None:
    """Print a generated table; optionally place it in a document and save the data behind it."""
    print(markdown)
    if out:
        write_between_markers(out, marker, markdown)
    if json_out:
        json_out.write_text(json.dumps(table, indent=1) + "\n")


def write_between_markers(path: Path, name: str, content: str) -> None:
    """Replaces what sits between <!-- name:start --> and <!-- name:end --> (the prose around it stays)."""
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    block = f"{start}\n{content}\n{end}"
    text = path.read_text() if path.exists() else ""
    if start in text and end in text:
        text = text[: text.index(start)] + block + text[text.index(end) + len(end):]
    else:
        text = (text + "\n\n" if text else "") + block + "\n"
    path.write_text(text)


@app.command("train-reranker", rich_help_panel=TOOLS)
def train_reranker(
    max_length: int = 128,
    layers: Annotated[int, typer.Option(help="keep the first N transformer layers (0 = all 6)")] = 0,
    batch_size: Annotated[int, typer.Option(help="queries per step")] = 16,
    in_batch: Annotated[int, typer.Option(help="other queries' positives added to each group")] = 2,
    epochs: float = 1.0,
    max_steps: int = 0,
    max_minutes: Annotated[float, typer.Option(help="training time budget (0 = none)")] = 75.0,
    lr: float = 5e-5,
    seed: int = 13,
    val_queries: int = 200,
    val_pool: int = 20,
    eval_every: int = 200,
    limit_triples: int = 0,
    device: str = "auto",
    base_model: Annotated[Optional[Path], typer.Option(help="start from this folder (default: pinned MiniLM)")] = None,
    out: Path = Path("var/models/reranker-trained"),
    ship: Annotated[bool, typer.Option(help="copy the int8 export into the package for `make run`")] = False,
):
    """Fine-tune a cross-encoder from MiniLM on ../shared/training, export ONNX fp32 + int8 with a model card."""
    with tool_imports("train-reranker"):
        from hybridsearch.reranker.export import export_trained, ship as ship_model
        from hybridsearch.tools.train_reranker import TrainConfig, build_validation, train

    cfg = TrainConfig(max_length=max_length, layers=layers, batch_size=batch_size, in_batch=in_batch, epochs=epochs,
                      max_steps=max_steps, max_minutes=max_minutes, lr=lr, seed=seed, val_queries=val_queries,
                      val_pool=val_pool, eval_every=eval_every, limit_triples=limit_triples, device=device,
                      base_model=base_model, out=out)
    validation = build_validation(cfg.heldout, cfg.val_queries, cfg.val_pool, cfg.seed)
    card = train(cfg, progress=console.print, validation=validation)
    if not (out / "config.json").exists():
        raise typer.Exit(f"no checkpoint beat the untrained model on validation; nothing exported ({card})")
    manifests = export_trained(out, card, validation)
    for precision, manifest in manifests.items():
        console.print(f"ONNX {precision}: {manifest['size_mb']} MB, validation MRR@10 {manifest.get('onnx_validation_mrr10')}")
    if ship:
        console.print(f"shipped the int8 model to {ship_model(out / 'onnx-int8', card, manifests)}")
    print(json.dumps({"card": {k: v for k, v in card.items() if k != "log"}, "onnx": manifests}, indent=1))
