"""`hybridsearch reindex` and `hybridsearch alias`: a collection re-indexed into a new generation behind its alias
(another embedder) with no downtime, checked on judgements before the switch, and switched back when needed.
Through the gateway's AliasService (admin key). docs/operations.md has the runbook."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.markup import escape

from hybridsearch.cli.base import OPERATE, app, console, tool_imports
from hybridsearch.cli.resources import gateway_call
from hybridsearch.cli.tables import Column, name_column, wrapping_table
from hybridsearch.contract.validation import generation_name
from hybridsearch.v1 import aliases_pb2

alias_app = typer.Typer(help="Aliases of re-indexed collections: show, list, switch, rollback, drop a generation",
                        no_args_is_help=True)
app.add_typer(alias_app, name="alias", rich_help_panel=OPERATE)
CHECK_MODES = "vector,hybrid"
PROGRESS_EVERY_S = 5.0


def roles(info: aliases_pb2.AliasInfo) -> str:
    return ", ".join(f"{g.number}: {aliases_pb2.GenerationRole.Name(g.role).removeprefix('GENERATION_ROLE_').lower()}"
                     for g in info.generations)


def print_alias(info: aliases_pb2.AliasInfo) -> None:
    table = wrapping_table(f"alias {info.collection}", ["generation", name_column("stored as"), Column("role", "left"),
                                                        Column("embedder", "left"), Column("language", "left"),
                                                        "documents", "chunks", Column("built", "left"),
                                                        Column("note", "left", ratio=1)])
    for g in info.generations:
        role = aliases_pb2.GenerationRole.Name(g.role).removeprefix("GENERATION_ROLE_").lower()
        table.add_row(str(g.number), g.stored_name, role, g.embedder, g.language or "declared", str(g.documents), str(g.chunks),
                      "yes" if g.built_unix or g.number == 0 else "no", g.note)
    console.print(table)


def quality(client, folder: Path, collection: str, modes: list[str]) -> dict[str, float]:
    """nDCG@10 of each bench mode on the judged queries of a BEIR-layout folder, searched in `collection`."""
    with tool_imports("reindex --check"):
        from hybridsearch.corpus import ignores_identical_ids, load_judged_queries
        from hybridsearch.tools.bench import BENCH_MODES, run_mode
    queries, qrels = load_judged_queries(folder)
    ignore = ignores_identical_ids(folder)
    return {mode: run_mode(client, BENCH_MODES[mode], queries, qrels, collection, ignore)["ndcg@10"] for mode in modes}


@app.command(rich_help_panel=OPERATE)
def reindex(
    collection: Annotated[str, typer.Option("--collection", "-c")] = "default",
    embedder: Annotated[str, typer.Option(help="the new generation's embedder (default: the deployment's); "
                                               "minilm-fp32, minilm-int8, mpnet-fp32, multilingual-e5-small, static-minilm")] = "",
    language: Annotated[str, typer.Option(help="the new generation's BM25 analysis language (en, de, ..., auto; "
                                               "default: the collection's declared one; the embedded BM25 engine)")] = "",
    check: Annotated[Optional[Path], typer.Option(exists=True, file_okay=False,
                     help="a BEIR-layout folder (queries.jsonl, qrels/test.tsv) of judgements on this collection: "
                          "nDCG@10 before and after, and no switch when it drops by more than --max-loss")] = None,
    check_modes: Annotated[str, typer.Option(help="with --check: the bench modes compared")] = CHECK_MODES,
    max_loss: Annotated[float, typer.Option(min=0.0, help="with --check: the largest nDCG@10 drop that still switches")] = 0.02,
    switch: Annotated[bool, typer.Option("--switch/--no-switch", help="switch the alias once built (and checked)")] = True,
    batch: Annotated[int, typer.Option(min=1, max=1000, help="documents copied per store call")] = 64,
):
    """Re-index a collection into a new generation beside the serving one (searches and writes go on; writes
    reach both), check it, then switch the alias to it in one step. The old generation stays, kept in step, for
    `alias rollback`, until dropped (`alias drop`). A re-index cut short is finished by running it again."""
    modes = [m.strip() for m in check_modes.split(",") if m.strip()]
    with gateway_call() as client:
        before = quality(client, check, collection, modes) if check else {}
        built, shown, last = None, 0.0, None
        for progress in client.reindex(collection, embedder, language=language, batch_documents=batch):
            built = progress
            phase = aliases_pb2.ReindexPhase.Name(progress.phase).removeprefix("REINDEX_PHASE_").lower()
            step = (progress.phase, progress.round, progress.copied)
            if step == last or (progress.phase == aliases_pb2.REINDEX_PHASE_COPYING and progress.copied < progress.to_copy
                                and progress.seconds - shown < PROGRESS_EVERY_S):
                continue  # a line a round, and one every few seconds of a long one, not one a batch
            shown, last = progress.seconds, step
            console.print(f"{progress.seconds:7.1f} s  {phase:<8} generation {progress.generation}"
                          + (f"  round {progress.round}: {progress.copied}/{progress.to_copy} copied, "
                             f"{progress.removed} removed, {progress.documents} documents serving"
                             if progress.phase == aliases_pb2.REINDEX_PHASE_COPYING else "")
                          + (f"  (writes held {progress.write_pause_ms:.0f} ms for the last round)"
                             if progress.write_pause_ms else ""), soft_wrap=True)
        number = built.generation
        if check:
            after = quality(client, check, generation_name(collection, number), modes)
            for mode in modes:
                console.print(f"nDCG@10 {mode}: {before[mode]:.4f} serving -> {after[mode]:.4f} generation {number} "
                              f"({after[mode] - before[mode]:+.4f})")
            worst = min(after[m] - before[m] for m in modes)
            if worst < -max_loss:
                console.print(f"[red]not switched[/]: nDCG@10 drops by {-worst:.4f} (> --max-loss {max_loss}); the "
                              f"generation stays built and in step: `hybridsearch alias switch {collection} {number}` "
                              f"serves it anyway, `hybridsearch alias drop {collection} {number}` abandons it")
                raise typer.Exit(1)
        if switch:
            info = client.switch_alias(collection, number)
            console.print(f"switched: {collection!r} serves generation {info.serving} ({roles(info)})")
        else:
            console.print(f"built, not switched: `hybridsearch alias switch {collection} {number}` serves it")


@alias_app.command("show")
def show(collection: Annotated[str, typer.Argument()] = "default"):
    """The alias's generations: which serves, which is being built, which served before."""
    with gateway_call() as client:
        print_alias(client.get_alias(collection))


@alias_app.command("list")
def list_():
    """Every alias."""
    with gateway_call() as client:
        listed = client.list_aliases()
    for info in listed.aliases:
        print_alias(info)
    if not listed.aliases:
        console.print("no aliases (a collection becomes one when it is re-indexed)")


@alias_app.command("switch")
def switch_(collection: Annotated[str, typer.Argument()],
            generation: Annotated[int, typer.Argument(min=0, help="a built generation, or the previous one")]):
    """Serve another generation (every gateway's searches within a second); the one serving becomes the previous."""
    with gateway_call() as client:
        info = client.switch_alias(collection, generation)
    console.print(f"{collection!r} serves generation {info.serving} ({roles(info)})")


@alias_app.command("rollback")
def rollback(collection: Annotated[str, typer.Argument()]):
    """Serve the previous generation again (kept in step: nothing written since is lost)."""
    with gateway_call() as client:
        info = client.rollback_alias(collection)
    console.print(f"{collection!r} serves generation {info.serving} again ({roles(info)})")


@alias_app.command("drop")
def drop(collection: Annotated[str, typer.Argument()],
         generation: Annotated[int, typer.Argument(min=0, help="not the serving one")],
         yes: Annotated[bool, typer.Option("--yes", "-y", help="do not ask")] = False):
    """Drop one generation from both stores: a retired one, the previous one (no rollback after), or one being
    built (the re-index abandoned)."""
    if not yes:
        typer.confirm(f"drop generation {generation} of {collection!r}?", abort=True)
    with gateway_call() as client:
        done = client.drop_generation(collection, generation)
    console.print(f"dropped {escape(done.dropped.collection)}: {done.dropped.documents} documents, "
                  f"{done.dropped.chunks} chunks ({roles(done.alias)})")
