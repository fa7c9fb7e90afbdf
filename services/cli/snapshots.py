"""`hybridsearch snapshot`: create, list, restore, delete and prune snapshots through the gateway's SnapshotService
(admin key). docs/operations.md has the runbook."""

from __future__ import annotations

from typing import Annotated, Optional

import typer
from rich.markup import escape

from hybridsearch.cli.base import OPERATE, app, console
from hybridsearch.cli.resources import gateway_call
from hybridsearch.cli.tables import Column, name_column, wrapping_table

snapshot_app = typer.Typer(help="Snapshots of a collection: create, list, restore, delete, prune", no_args_is_help=True)
app.add_typer(snapshot_app, name="snapshot", rich_help_panel=OPERATE)
REPOSITORY = typer.Option("--repository", "--to", help="a folder or s3://bucket/prefix (default: the deployment's "
                                                       "snapshots.repository, else data_dir/snapshots/repository)")


def size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


@snapshot_app.command("create")
def create(collections: Annotated[Optional[list[str]], typer.Option("--collection", "-c", help="repeat for several")] = None,
           repository: Annotated[str, REPOSITORY] = "",
           keep: Annotated[Optional[int], typer.Option(min=1, help="then delete each collection's snapshots beyond "
                                                                  "the newest KEEP (the chart's CronJob)")] = None):
    """Snapshot a collection (writes pause while each store takes its state; searches go on). Prints each
    snapshot's location as the last word of its line: the last word of the output is the last one's."""
    with gateway_call() as client:
        for collection in collections or ["default"]:
            made = client.create_snapshot(collection, repository)
            console.print(f"snapshot of {made.collection!r}: {made.documents} documents, {made.chunks} chunks, "
                          f"{size(made.bytes_total)} ({size(made.bytes_new)} new in the repository), writes paused "
                          f"{made.write_pause_ms:.0f} ms, {made.seconds:.1f} s", soft_wrap=True)
            if keep is not None:
                pruned(client, collection, repository, keep)
            print(made.location, flush=True)


def pruned(client, collection: str, repository: str, keep: int) -> int:
    """Deletes the collection's snapshots beyond the newest `keep`; how many it deleted."""
    listed = client.list_snapshots(collection, repository)
    for old in listed.snapshots[keep:]:
        gone = client.delete_snapshot(old.location)
        console.print(f"deleted {old.location}: {gone.pieces_deleted} pieces freed", soft_wrap=True)
    return max(0, len(listed.snapshots) - keep)


@snapshot_app.command("list")
def list_(collection: Annotated[str, typer.Option("--collection", "-c", help="one collection's only")] = "",
          repository: Annotated[str, REPOSITORY] = ""):
    """The repository's snapshots, newest first."""
    with gateway_call() as client:
        listed = client.list_snapshots(collection, repository)
    table = wrapping_table("snapshots", [Column("created", "left"), name_column("collection"), "documents", "size", "new",
                                         "pause ms", Column("location", "left", ratio=1)])
    for s in listed.snapshots:
        table.add_row(s.created_at, s.collection, str(s.documents), size(s.bytes_total), size(s.bytes_new),
                      f"{s.write_pause_ms:.0f}", s.location)
    console.print(table)
    for notice in listed.notices:
        console.print(f"[yellow]{escape(notice)}[/]", soft_wrap=True)


@snapshot_app.command("restore")
def restore(location: Annotated[str, typer.Argument(help="a snapshot's location (snapshot list)")],
            collection: Annotated[Optional[str], typer.Option("--collection", "-c",
                                                               help="restore under this name (default: the "
                                                                    "snapshot's own); it must not exist")] = None):
    """Restore a snapshot whole, or nothing: checked piece by piece; the collection serves once both stores hold
    it. A restore cut short is finished by running it again."""
    with gateway_call() as client:
        done = client.restore_snapshot(location, collection or "")
    console.print(f"restored {done.collection!r}: {done.documents} documents, {done.chunks} chunks, "
                  f"{size(done.bytes_read)} read in {done.seconds:.1f} s", soft_wrap=True)


@snapshot_app.command("delete")
def delete(location: Annotated[str, typer.Argument(help="a snapshot's location (snapshot list)")]):
    """Delete a snapshot and the pieces no other snapshot holds."""
    with gateway_call() as client:
        gone = client.delete_snapshot(location)
    kept = f", {gone.pieces_kept} kept while a snapshot is being taken" if gone.pieces_kept else ""
    console.print(f"deleted {location}: {gone.pieces_deleted} pieces freed{kept}", soft_wrap=True)


@snapshot_app.command("prune")
def prune(collection: Annotated[str, typer.Option("--collection", "-c")] = "default",
          keep: Annotated[int, typer.Option(min=1, help="how many of the newest snapshots to keep")] = 7,
          repository: Annotated[str, REPOSITORY] = ""):
    """Keep the newest KEEP snapshots of a collection, delete the older ones."""
    with gateway_call() as client:
        deleted = pruned(client, collection, repository, keep)
    console.print(f"{deleted} snapshots of {collection!r} deleted, the newest {keep} at most kept")
