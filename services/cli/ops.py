"""Operate: what is up, drift between the stores, API keys and TLS certificates."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.table import Table

from hybridsearch.cli.base import OPERATE, app, console, split_csv
from hybridsearch.cli.tables import Column, wrapping_table
from hybridsearch.config.settings import get_settings


@app.command(rich_help_panel=OPERATE)
def doctor():
    """What is up: every service, its engine and models, Redis, Triton."""
    from hybridsearch.doctor import run_doctor

    raise typer.Exit(run_doctor(Console()))


@app.command(rich_help_panel=OPERATE)
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

    from hybridsearch.storage.holds import Held

    try:
        rows = asyncio.run(run())
    except Held as err:
        console.print(f"[red]{err}[/]: reconcile it once that ends", soft_wrap=True)
        raise typer.Exit(2) from None
    for r in rows:
        if not r["held"]:
            console.print(f"[yellow]{r['collection']} was reconciled unheld (Redis not reachable)[/]")
    console.print(reconcile_table(rows, dry_run))
    if json_out:
        json_out.write_text(json.dumps(rows, indent=2))
    if any(r["reingest_count"] for r in rows):
        raise typer.Exit(3)


RECONCILE_COLUMNS = (Column("collection", "left"), "bm25 docs", "vector docs", "missing", "diverged", "torn", "consistent",
                     "repaired", "re-ingest")


def reconcile_table(rows: list[dict], dry_run: bool) -> Table:
    """Reconciler rows (reconcile.run.Report.row) as a table that wraps at any width (cli.tables)."""
    table = wrapping_table("reconcile" + (" (dry run)" if dry_run else ""), RECONCILE_COLUMNS)
    for r in rows:
        f = r["found"]
        table.add_row(r["collection"], str(r["documents"]["bm25"]), str(r["documents"]["vector"]), str(f["missing"]),
                      str(f["diverged"]), str(f["torn"]), str(f["consistent"]), str(r["repaired"]), str(r["reingest_count"]))
    return table


keys_app = typer.Typer(help="API keys per tenant, and sealed collections' keys (docs/security.md)",
                       no_args_is_help=True)
app.add_typer(keys_app, name="keys", rich_help_panel=OPERATE)


def create_collection_key(collection: str, keys_file: Optional[Path]) -> None:
    """`keys create -c NAME`: a sealed collection's key, never printed (only its id and the file)."""
    from hybridsearch.security.keys_file import create_collection_key as create, keys_path

    settings = get_settings()
    path = keys_file or keys_path(settings)
    try:
        key_id = create(path, collection)
    except (OSError, ValueError) as err:
        console.print(f"[red]{err}[/]")
        raise typer.Exit(2) from None
    sealed = "" if settings.collections.get(collection, None) and settings.collections[collection].sealed else (
        f"; declare `sealed: true` for {collection!r} in the collections settings to seal its records")
    console.print(f"key {key_id} for collection {collection!r} added to {path} (0600; the key is not shown){sealed}")


@keys_app.command("create")
def keys_create(
    tenant: Annotated[str, typer.Option(help="tenant name (an API key)")] = "",
    read: Annotated[str, typer.Option(help="collections it may read: names or prefix* patterns, comma-separated")] = "",
    write: Annotated[str, typer.Option(help="collections it may write (upsert, delete), same form")] = "",
    admin: Annotated[bool, typer.Option("--admin", help="every operation on every collection")] = False,
    principal: Annotated[list[str], typer.Option(help="whom the key reads documents as: user:<name> or "
                                                      "group:<name>, repeated")] = [],
    may_act_for: Annotated[list[str], typer.Option(help="principals it may search on behalf of (the "
                                                        "x-hybridsearch-act-for header): user:ana, user:*, group:eng-*; "
                                                        "repeated")] = [],
    collection: Annotated[str, typer.Option("--collection", "-c",
                                            help="a sealed collection's key instead of an API key (sealing.keys_file, "
                                                 "else DATA_DIR/sealing/keys.yaml)")] = "",
    keys_file: Annotated[Optional[Path], typer.Option(help="default: auth.keys_file, else DATA_DIR/auth/keys.yaml "
                                                           "(with -c: the sealing keys file)")] = None,
):
    """Make a random API key, append its sha256 to the keys file and print the key (shown only this once);
    with -c, a sealed collection's 256-bit key in the sealing keys file (never shown)."""
    from hybridsearch.security.apikeys import KEYS_FILE, KeyFileError, create_key, local_auth_dir

    if collection:
        if tenant or read or write or admin or principal or may_act_for:
            console.print("[red]-c makes a collection key: --tenant, --read, --write, --admin, --principal and "
                          "--may-act-for are for API keys[/]")
            raise typer.Exit(2)
        return create_collection_key(collection, keys_file)
    if not tenant:
        console.print("[red]give --tenant (an API key) or -c NAME (a sealed collection's key)[/]")
        raise typer.Exit(2)
    settings = get_settings()
    path = keys_file or settings.auth.keys_file or local_auth_dir(settings.data_dir) / KEYS_FILE
    try:
        key, entry = create_key(path, tenant, split_csv(read), split_csv(write), role="admin" if admin else "tenant",
                                principals=principal, may_act_for=may_act_for)
    except KeyFileError as err:
        console.print(f"[red]{err}[/]")
        raise typer.Exit(2) from None
    rights = "admin: everything" if admin else f"read {list(entry.read)} write {list(entry.write)}"
    rights += f"; principals {list(entry.principals)}" if entry.principals else ""
    rights += f"; may act for {list(entry.may_act_for)}" if entry.may_act_for else ""
    console.print(f"key {entry.id} for tenant {entry.tenant!r} ({rights}) added to {path}; "
                  "it is printed once, below, and stored only as a hash")
    print(key)


@app.command(rich_help_panel=OPERATE)
def certs(
    out: Annotated[Optional[Path], typer.Option(help="default: DATA_DIR/tls")] = None,
    dns: Annotated[str, typer.Option(help="extra DNS names for the server certificate, comma-separated")] = "",
    ip: Annotated[str, typer.Option(help="extra IP addresses for the server certificate, comma-separated")] = "",
):
    """A local CA, a server certificate (localhost, 127.0.0.1, the service names) and an internal client
    certificate, for HYBRIDSEARCH_TLS__ENABLED=true (docs/security.md). Replaces what is there."""
    from hybridsearch.security.tls import local_tls_dir, make_certificates

    folder = out or local_tls_dir(get_settings().data_dir)
    for path in make_certificates(folder, split_csv(dns), split_csv(ip)):
        console.print(f"  {path}")
