"""Developer tools for performance: the load generator, sequential latency, scale corpora and store probes,
the Grafana dashboards. Their heavy modules are imported inside each command, under tool_imports."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.markup import escape

from hybridsearch.cli.base import TOOLS, app, console, gateway_client, progress_bar, tool_imports
from hybridsearch.config.settings import get_settings


@app.command(rich_help_panel=TOOLS)
def loadtest(
    mode: Annotated[str, typer.Argument(help="open | closed | ramp | mixed (queries alone, then while writing) | burst")] = "open",
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
    burst_size: Annotated[int, typer.Option(help="burst: requests sent at once")] = 40,
    bursts: Annotated[int, typer.Option(help="burst: how many bursts")] = 1,
    burst_gap: Annotated[float, typer.Option(help="burst: seconds from one burst to the next")] = 2.0,
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
    zipf: Annotated[float, typer.Option(help="> 0: queries repeat as real traffic does, drawn with this Zipf exponent (1.0: s = 1) over a seeded popularity order, not cycled in file order")] = 0.0,
    pids: Annotated[str, typer.Option(help="comma list of pids whose RSS is sampled every second")] = "",
    rss: Annotated[bool, typer.Option(help="sample the RSS of every running `hybridsearch serve` process, Triton, Redis")] = False,
    cpu: Annotated[bool, typer.Option("--cpu/--no-cpu", help="CPU ms per answer of the stack's processes (or --pids), per run and as a headline per scenario")] = True,
    baseline_cpu_ms: Annotated[Optional[float], typer.Option(help="the in-process baseline's CPU ms per query, for the headline's ratio")] = None,
    baseline_from: Annotated[Optional[Path], typer.Option(exists=True, dir_okay=False, help="... read from a `hybridsearch speed --json-out` file (with its embedding's part)")] = None,
    profile: Annotated[Optional[Path], typer.Option(file_okay=False, help="closed loop, one scenario: py-spy flame graphs of every service into this folder, and the CPU budget by stage")] = None,
    py_spy: Annotated[Optional[str], typer.Option(help="the py-spy binary (default: on PATH or beside this Python)")] = None,
    profile_rate: Annotated[int, typer.Option(help="py-spy samples a second")] = 100,
    address: Annotated[Optional[str], typer.Option(help="gateway (loopback only; default from settings)")] = None,
    out: Annotated[Optional[Path], typer.Option(help="folder for loadtest.json and the PNGs (default var/loadtest/<time>-<mode>)")] = None,
):
    """Load a running gateway over loopback gRPC: open/closed loop, ramp to the knee, queries while writing,
    bursts of concurrent requests; CPU per answer of every stack process."""
    import datetime as dt

    with tool_imports("loadtest"):
        from hybridsearch.tools.perf.budget import BUDGET_NAME, budget_of_folder, budget_table
        from hybridsearch.tools.perf.cpu import BaselineCpu, query_cache_on
        from hybridsearch.tools.perf.flame import ProfileSpec, find_py_spy
        from hybridsearch.tools.perf.load.bounds import LoadBoundsError, check_loopback
        from hybridsearch.tools.perf.load.memory import discover, name_pids
        from hybridsearch.tools.perf.load.ramp import default_steps, parse_steps
        from hybridsearch.tools.perf.load.report import print_summary, write_outputs
        from hybridsearch.tools.perf.load.scenarios import (bench_collection, load_queries, parse_scenarios,
                                                           repeat_share, zipf_sequence)
        from hybridsearch.tools.perf.load.session import LoadPlan, execute

    settings = get_settings()
    try:
        target = check_loopback(address or settings.endpoints.addr("gateway"))
        default_collection = "default"
        if dataset is not None:
            console.print(f"{dataset.name}: indexing into its bench collection when needed…")
            default_collection, indexed = bench_collection(dataset, target, settings)
            console.print(f"{dataset.name}: collection {default_collection} ({indexed} documents indexed now)")
        queries = load_queries(queries_from or dataset)
        if zipf < 0:
            raise ValueError(f"--zipf must be 0 (cycle the queries) or a positive exponent, not {zipf}")
        if zipf:
            queries = zipf_sequence(queries, zipf, seed)
            console.print(f"queries: Zipf s={zipf:g} over {len(set(queries))} distinct, "
                          f"{repeat_share(queries):.0%} of requests repeat an earlier query")
        plan = LoadPlan(
            mode=mode, address=target, collection=collection or default_collection,
            queries=queries, zipf=zipf, scenarios=parse_scenarios(scenario), rate=rate,
            arrivals=arrivals, duration_s=duration, workers=workers,
            steps=parse_steps(steps) if steps else default_steps(max_qps=max_qps), step_s=step_seconds,
            p99_limit_ms=p99_limit_ms, max_error_rate=max_error_rate, write_rate=write_rate, write_batch=write_batch,
            write_corpus=write_corpus, keep_written=keep_written, write_deadline_s=write_deadline_ms / 1000,
            burst_size=burst_size, bursts=bursts, burst_gap_s=burst_gap, top_k=top_k,
            deadline_s=deadline_ms / 1000, channels=channels, max_outstanding=max_outstanding,
            stage_timings=stage_timings, warmup=warmup, seed=seed,
        )
        processes = {}
        if pids:
            processes = name_pids([int(p) for p in pids.split(",") if p.strip()])
        elif rss or cpu:
            processes = discover()
            if target.rsplit(":", 1)[1] != settings.endpoints.addr("gateway").rsplit(":", 1)[1]:
                console.print("[yellow]--address is not these settings' gateway: the processes measured are "
                              "these settings' stack's (name the right ones with --pids)[/]")
        plan.rss_pids = processes if pids or rss else {}
        plan.cpu_pids = processes if pids or cpu else {}
        plan.query_cache = query_cache_on(settings)
        if baseline_from is not None:
            plan.baseline_cpu = BaselineCpu.from_speed_json(baseline_from)
        elif baseline_cpu_ms is not None:
            plan.baseline_cpu = BaselineCpu(baseline_cpu_ms)
        if profile is not None:
            plan.profile = ProfileSpec(profile, find_py_spy(py_spy), profile_rate)
        plan.check()
    except (LoadBoundsError, ValueError, FileNotFoundError) as err:
        console.print(f"[red]{escape(str(err))}[/]", soft_wrap=True)
        raise typer.Exit(2) from None
    report = execute(plan)
    folder = out or settings.data_dir / "loadtest" / f"{dt.datetime.now():%Y%m%d-%H%M%S}-{mode}"
    path = write_outputs(report, folder)
    print_summary(report, Console())
    console.print(f"report → {path} (plots: {', '.join(report['plots']) or 'none'})")
    if report["profile"]:
        budget = budget_of_folder(profile)
        (profile / BUDGET_NAME).write_text(json.dumps(budget, indent=1))
        Console().print(budget_table(budget))
        console.print(f"flame graphs, collapsed stacks and the budget → {profile}")


@app.command(rich_help_panel=TOOLS)
def speed(
    folder: Annotated[Path, typer.Argument(exists=True, file_okay=False, help="BEIR-layout folder")],
    modes: Annotated[str, typer.Option(help="comma list of bm25,vector,fast,balanced")] = "bm25,vector,fast,balanced",
    top_k: Annotated[int, typer.Option(help="hits per answer")] = 10,
    limit: Annotated[int, typer.Option(help="only the first N judged queries (0 = all)")] = 0,
    budget: Annotated[bool, typer.Option("--budget/--no-budget", help="a second pass with explain: stage timings")] = True,
    cpu: Annotated[bool, typer.Option("--cpu/--no-cpu", help="CPU ms per answer of every stack process (their CPU clocks between calls)")] = True,
    json_out: Annotated[Optional[Path], typer.Option("--json-out", help="write the figures here")] = None,
    collections: Annotated[str, typer.Option(help="comma list of collections already holding the corpus, each mode "
                                                  "run on each, alternated (default: its bench collection, indexed "
                                                  "when needed)")] = "",
):
    """Sequential latency and CPU per answer through a running gateway, interleaved with the in-process
    library baseline."""
    with tool_imports("speed"):
        from hybridsearch.tools.bench import collection_name, ensure_indexed
        from hybridsearch.corpus import beir_corpus_file, load_judged_queries, read_beir_corpus
        from hybridsearch.tools.perf.baseline import BaselineDocument, LibraryBaseline
        from hybridsearch.tools.perf.cpu import query_cache_on, settled
        from hybridsearch.tools.perf.load.memory import discover
        from hybridsearch.tools.perf.procs import cpu_ns_of
        from hybridsearch.tools.perf.speed import (SPEED_MODES, budget_markdown, cpu_figures, cpu_markdown,
                                                   default_embeds, run_speed, speed_columns, stage_budget,
                                                   to_markdown)

    wanted = [m.strip() for m in modes.split(",") if m.strip()]
    if unknown := [m for m in wanted if m not in SPEED_MODES]:
        raise typer.BadParameter(f"unknown modes {unknown}: choose from {', '.join(SPEED_MODES)}")
    settings = get_settings()
    client = gateway_client()
    named = [c.strip() for c in collections.split(",") if c.strip()]
    collection = named[0] if named else collection_name(folder, settings)
    wanted = speed_columns(wanted, named)
    queries, qrels = load_judged_queries(folder, limit)
    pids = discover() if cpu else {}
    if cpu and "gateway" not in pids:
        console.print("[yellow]CPU per answer: no gateway process of these settings' stack on this machine; "
                      "the stack's CPU is not measured[/]")
        pids = {}
    with progress_bar() as progress:
        task = progress.add_task(f"indexing {folder.name}", total=None)
        if not named:
            ensure_indexed(client, folder, collection, progress=lambda n: progress.advance(task, n))
        progress.add_task("building the in-process baseline", total=None)
        documents = [BaselineDocument(d.id, d.title, d.text) for d in read_beir_corpus(beir_corpus_file(folder))]
        baseline = LibraryBaseline.build(documents, settings.data_dir / "cache" / "embeddings.sqlite",
                                         settings.vector.embedder, settings.vector.max_seq_length)
        t = progress.add_task("interleaved run", total=len(queries))
        result = run_speed(client, baseline, queries, qrels, collection, wanted, top_k,
                           progress=lambda: progress.advance(t),
                           cpu=(lambda: settled(lambda: cpu_ns_of(pids))) if pids else None)
        embeds = default_embeds(wanted)
        if budget:
            progress.add_task("stage budget (explain on)", total=None)
            result["budget"], counted = stage_budget(client, queries, collection, wanted, top_k)
            embeds.update(counted)
    result["dataset"] = folder.resolve().name
    result["collections"] = named or [collection]
    result["cpu"]["processes"] = pids
    # The vector leg reports its cache lookups (explain) only with a cache level on: the stack's own word,
    # where the budget pass ran; these settings' otherwise.
    cached = (any(stage.endswith(".embed_cache") for per in result["budget"].values() for stage in per) if budget
              else query_cache_on(settings))
    cpu_figures(result, embeds, cached)
    console.print(to_markdown(result))
    console.print("\nCPU ms per answer (each process's CPU clock, read between calls):")
    console.print(cpu_markdown(result), soft_wrap=True)
    if budget:
        console.print(budget_markdown(result["budget"]))
    if json_out:
        json_out.write_text(json.dumps(result, indent=2))


@app.command("scale-corpus", rich_help_panel=TOOLS)
def scale_corpus(
    size: Annotated[int, typer.Option(help="passages: real ones first, then generated (hybridsearch.tools.perf.scale)")] = 100_000,
    out: Annotated[Path, typer.Option(help="where scale-N/corpus.jsonl.gz goes")] = Path.home() / ".cache" / "hybridsearch" / "scale",
    embed: Annotated[bool, typer.Option("--embed/--no-embed", help="fill the embedding cache of --data-dir")] = False,
    data_dir: Annotated[Optional[Path], typer.Option(help="the data dir whose vector service will index it")] = None,
    seed: Annotated[int, typer.Option()] = 15,
    shared: Annotated[Path, typer.Option(help="the shared folder (training passages, datasets)")] = Path("../shared"),
    threads: Annotated[int, typer.Option(help="embedding threads (0: up to 4); 1 leaves a core to other work")] = 0,
    embedder: Annotated[Optional[str], typer.Option(help="the embedder whose vectors --embed caches (default: vector.embedder); "
                                                         "static-minilm: model2vec bench vectors, a million in minutes; serve "
                                                         "the stack with HYBRIDSEARCH_VECTOR__EMBEDDER set to the same")] = None,
):
    """Builds a 100k / 1M passage corpus (BEIR layout) and, with --embed, its vectors (resumable)."""
    with tool_imports("scale-corpus"):
        from hybridsearch.tools.perf.scale import embed_corpus, write_corpus
        from hybridsearch.vector.embedder import EMBEDDERS, EmbeddingCache, open_embedder

    settings = get_settings()
    cfg = settings.vector
    name = embedder or cfg.embedder
    if name not in EMBEDDERS:
        raise typer.BadParameter(f"unknown embedder {name!r}: choose one of {', '.join(EMBEDDERS)}", param_hint="--embedder")
    corpus = write_corpus(shared, size, out, seed)
    console.print(f"corpus: {corpus}")
    if embed:
        cache_path = (data_dir or settings.data_dir) / "cache" / "embeddings.sqlite"
        cache = EmbeddingCache(cache_path, open_embedder(name, cfg.max_seq_length, cfg.batch_size, threads), cfg.max_seq_length)
        with progress_bar() as progress:
            task = progress.add_task(f"embedding {size:,} passages ({name})", total=size)
            record = embed_corpus(corpus, cache, progress=lambda n: progress.advance(task, n))
        console.print(f"embedding cache {cache_path}: {record}")


@app.command("write-visibility", rich_help_panel=TOOLS)
def write_visibility(
    collection: Annotated[str, typer.Option("--collection", "-c", help="a collection of the running stack")],
    writes: Annotated[int, typer.Option(min=1, help="documents written, one Upsert each (deleted afterwards)")] = 20,
    json_out: Annotated[Optional[Path], typer.Option("--json-out")] = None,
):
    """How soon a written document is found by each leg of a running gateway (tools.perf.visibility)."""
    with tool_imports("write-visibility"):
        from hybridsearch.tools.perf.visibility import measure

    with gateway_client() as client:
        result = measure(client, collection, writes)
    console.print_json(data=result)
    if json_out:
        json_out.write_text(json.dumps(result, indent=2))


@app.command("bm25-scale", rich_help_panel=TOOLS)
def bm25_scale(
    corpus: Annotated[Path, typer.Argument(exists=True, help="a corpus.jsonl(.gz), e.g. scale-corpus's")],
    queries_from: Annotated[Path, typer.Option(exists=True, file_okay=False, help="a BEIR folder: its queries")],
    data_dir: Annotated[Path, typer.Option(help="the folder for the index (never a running stack's data dir)")],
    limit: Annotated[int, typer.Option(help="the first N queries")] = 300,
    writers: Annotated[int, typer.Option(help="concurrent one-document writers for the small-writes phase (0: none)")] = 8,
    collection: Annotated[Optional[str], typer.Option("--collection", "-c", help="the index's name (default bm25-scale; "
                                                       "vector-scale: beside that tool's store in the same --data-dir)")] = None,
    json_out: Annotated[Optional[Path], typer.Option("--json-out")] = None,
):
    """The BM25 store alone at a corpus size: index throughput, reopen, search p50/p99, memory, disk, and
    small concurrent writes with a commit each vs group commit."""
    with tool_imports("bm25-scale"):
        from hybridsearch.corpus import read_queries
        from hybridsearch.tools.perf.bm25_scale import COLLECTION, run

    name = collection or COLLECTION
    if (data_dir / "bm25-tantivy" / name).exists():
        raise typer.BadParameter(f"{data_dir} already holds a BM25 index {name!r}", param_hint="--data-dir")
    settings = get_settings().model_copy(update={"data_dir": data_dir})
    queries = list(read_queries(queries_from).values())[:limit]
    with progress_bar() as progress:
        task = progress.add_task(f"indexing {corpus.name}", total=None)
        result = run(settings, corpus, queries, progress=lambda n: progress.update(task, completed=n), writers=writers,
                     collection=name)
    console.print_json(data=result)
    if json_out:
        json_out.write_text(json.dumps(result, indent=2))


@app.command("vector-scale", rich_help_panel=TOOLS)
def vector_scale(
    corpus: Annotated[Path, typer.Argument(exists=True, help="a corpus.jsonl(.gz), e.g. scale-corpus's")],
    queries_from: Annotated[Path, typer.Option(exists=True, file_okay=False, help="a BEIR folder: its queries")],
    data_dir: Annotated[Path, typer.Option(help="the folder for the store (never a stack's data dir); its cache/embeddings.sqlite is read")],
    embedder: Annotated[Optional[str], typer.Option(help="whose vectors (default: vector.embedder); static-minilm: model2vec bench vectors")] = None,
    batch: Annotated[int, typer.Option(min=1, help="documents a write")] = 500,
    limit: Annotated[int, typer.Option(help="the first N queries")] = 300,
    writes: Annotated[int, typer.Option(min=1, help="single writes whose visibility is measured")] = 20,
    documents: Annotated[Optional[int], typer.Option(min=1, help="the corpus's first N documents (default: all)")] = None,
    ef: Annotated[Optional[list[int]], typer.Option(min=1, help="search beams (hnsw_ef) probed beside the served one; repeatable")] = None,
    resume: Annotated[bool, typer.Option(help="go on with the store an earlier run left in --data-dir: a finished load is kept, a cut-short one run again; then the build and the probe")] = False,
    json_out: Annotated[Optional[Path], typer.Option("--json-out", help="written after every phase")] = None,
):
    """The vector store alone at a corpus size: bulk load, HNSW build, reopen, recall@10 against exact
    search, search p50/p99, memory, disk, a write's visibility. Settings from the environment as the
    service takes them (e.g. HYBRIDSEARCH_VECTOR__QUANTIZATION=int8), recorded in the output."""
    with tool_imports("vector-scale"):
        from hybridsearch.corpus import read_queries
        from hybridsearch.tools.perf.vector_scale import COLLECTION, run
        from hybridsearch.vector.embedder import EMBEDDERS

    base = get_settings()
    name = embedder or base.vector.embedder
    if name not in EMBEDDERS:
        raise typer.BadParameter(f"unknown embedder {name!r}: choose one of {', '.join(EMBEDDERS)}", param_hint="--embedder")
    if (data_dir / "qdrant-edge" / COLLECTION).exists() and not resume:
        raise typer.BadParameter(f"{data_dir} already holds a {COLLECTION} store (--resume goes on with it)",
                                 param_hint="--data-dir")
    settings = base.model_copy(update={"data_dir": data_dir,
                                       "vector": base.vector.model_copy(update={"embedder": name})})
    queries = list(read_queries(queries_from).values())[:limit]
    with progress_bar() as progress:
        task = progress.add_task(f"loading {corpus.name}", total=None)
        result = run(settings, corpus, queries, name, batch, lambda n: progress.update(task, completed=n), writes,
                     documents, record=lambda out: json_out and json_out.write_text(json.dumps(out, indent=2)),
                     efs=tuple(ef or ()))
    console.print_json(data=result)


@app.command("store-probe", rich_help_panel=TOOLS)
def store_probe(
    collection: Annotated[str, typer.Option("--collection", "-c", help="a collection of the stopped stack's data dir")],
    queries_from: Annotated[Path, typer.Option(exists=True, file_okay=False, help="a BEIR folder: its queries")],
    limit: Annotated[int, typer.Option(help="the first N queries")] = 300,
    ef: Annotated[Optional[list[int]], typer.Option(min=1, help="search beams (hnsw_ef) measured beside the served one; repeatable")] = None,
    bm25: Annotated[bool, typer.Option("--bm25/--no-bm25", help="--no-bm25: a data dir with the vector store alone (vector-scale's)")] = True,
    json_out: Annotated[Optional[Path], typer.Option("--json-out")] = None,
):
    """With the services stopped: reopen times of both stores, ANN recall@10 against exact search."""
    with tool_imports("store-probe"):
        from hybridsearch.corpus import read_queries
        from hybridsearch.tools.perf.store_probe import run_probe

    settings = get_settings()
    queries = list(read_queries(queries_from).values())[:limit]
    result = run_probe(settings, collection, queries, settings.query.leg_depth, bm25, ef or ())
    console.print_json(data=result)
    if json_out:
        json_out.write_text(json.dumps(result, indent=2))


@app.command(rich_help_panel=TOOLS)
def dashboards(
    out: Annotated[Path, typer.Option(help="folder for the JSON files")] = Path("charts/hybridsearch/files/dashboards"),
):
    """Write the Grafana dashboards (grafana-foundation-sdk) as JSON, one file per dashboard."""
    with tool_imports("dashboards"):
        from hybridsearch.observability.dashboards import write_dashboards

    for path in write_dashboards(out):
        console.print(f"wrote {path}")
