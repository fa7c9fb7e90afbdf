"""`hybridsearch readers-bench`: what document readers cost and change on a BEIR collection (tools/perf/readers_bench.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.markup import escape

from hybridsearch.cli.base import TOOLS, app, console, progress_bar, tool_imports
from hybridsearch.config.settings import get_settings


@app.command("readers-bench", rich_help_panel=TOOLS)
def readers_bench(
    folder: Annotated[Path, typer.Argument(help="BEIR-layout folder (corpus.jsonl, queries.jsonl, qrels/test.tsv)")],
    shares: Annotated[str, typer.Option(help="comma list of readers' shares, percent of the documents")] = "1,10,50",
    modes: Annotated[str, typer.Option(help="comma list of bench modes (bm25, vector, hybrid, default, ...)")] =
        "bm25,vector,hybrid,default",
    limit: Annotated[int, typer.Option(min=1, help="judged queries searched")] = 200,
    json_out: Annotated[Optional[Path], typer.Option(help="write the rows here as JSON")] = None,
):
    """Each share's reader against a collection of only its share and against no readers at all: nDCG@10, full
    pages, top-10 overlap, p50 ratios. Runs against the stack of these settings (`hybridsearch serve all`, API keys
    on: it adds a key per share to the keys file); writes `acl-<name>` and `acl-<name>-p<share>` collections once."""
    with tool_imports("readers-bench"):
        from hybridsearch.client import GatewayClient
        from hybridsearch.corpus import load_judged_queries, read_beir_corpus
        from hybridsearch.security.apikeys import create_key
        from hybridsearch.tools.bench import BENCH_MODES
        from hybridsearch.tools.perf.readers_bench import bucket, corpus_of, ensure, forget_expansions, group, measure, \
            shared_qrels, with_acl

    settings = get_settings()
    if settings.auth.keys_file is None and not (settings.data_dir / "auth" / "keys.yaml").exists():
        console.print("[red]readers-bench needs API keys on (`hybridsearch serve all` makes them)[/]")
        raise typer.Exit(2)
    wanted = [m.strip() for m in modes.split(",") if m.strip()]
    if unknown := [m for m in wanted if m not in BENCH_MODES]:
        console.print(f"[red]unknown modes {escape(str(unknown))}: choose from {', '.join(BENCH_MODES)}[/]")
        raise typer.Exit(2)
    share_list = tuple(sorted({int(s) for s in shares.split(",") if s.strip()}))
    corpus, count = corpus_of(folder)
    name = "acl-" + folder.resolve().name.lower()[:30]
    address = settings.endpoints.addr("gateway")
    keys_file = settings.auth.keys_file or settings.data_dir / "auth" / "keys.yaml"
    queries, qrels = load_judged_queries(folder, limit)
    rows = []
    with GatewayClient(address) as admin:
        spent = ensure(admin, name, lambda: with_acl(read_beir_corpus(corpus), share_list), count)
        console.print(f"{name}: {count} documents with readers ({spent:.0f} s to write)")
        forgotten = forget_expansions(settings.redis.cache_url or settings.redis.state_url,
                                      [name, *(f"{name}-p{s}" for s in share_list)])
        console.print(f"{forgotten} cached expansions of earlier runs forgotten: every search starts cold")
        for share in share_list:
            only = [d for d in read_beir_corpus(corpus) if bucket(d.id) < share]
            spent = ensure(admin, f"{name}-p{share}", lambda only=only: iter(only), len(only))
            console.print(f"{name}-p{share}: {len(only)} documents, no readers ({spent:.0f} s to write)")
            key, _ = create_key(keys_file, "readers-bench", [f"{name}*"], [], principals=["user:bench", group(share)])
            with GatewayClient(address, api_key=key) as reader, progress_bar() as progress:
                task = progress.add_task(f"share {share}%", total=len(wanted) * len(queries))
                for mode in wanted:
                    searchers = {"acl": reader.search, "only": admin.search, "open": admin.search}
                    cell = measure(searchers, {"acl": name, "only": f"{name}-p{share}", "open": name}, queries,
                                   share, mode, lambda: progress.advance(task))
                    rows.append(cell.figures(shared_qrels(qrels, share)))
    for row in rows:
        console.print(f"p{row['share']:>2} {row['mode']:<8} nDCG@10 acl {row['ndcg@10_acl']} only "
                      f"{row['ndcg@10_only']} ({row['judged']} judged) full {row['full_pages']}/{row['queries']} "
                      f"overlap {row['top10_overlap']} foreign {row['foreign_hits']} p50 {row['p50_ms']} "
                      f"ratio {row['p50_ratio_acl_open']}")
    if json_out is not None:
        json_out.write_text(json.dumps(rows, indent=1))
