"""A sealed collection's key lifecycle (docs/security.md "Sealed at rest"): `keys rotate`, `keys retire`,
`keys destroy`, `keys adopt` (another name's keys, for a snapshot restored under a new name), beside
`keys create -c` (ops.py). Each names the keys file like `keys create -c` does."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated, Optional

import typer

from hybridsearch.cli.base import console, progress_bar
from hybridsearch.cli.ops import keys_app
from hybridsearch.config.settings import get_settings

COLLECTION = typer.Option("--collection", "-c", help="the sealed collection")
KEYS_FILE = typer.Option(help="the sealing keys file (default: sealing.keys_file, else DATA_DIR/sealing/keys.yaml)")


def _path(keys_file: Optional[Path]) -> Path:
    from hybridsearch.security.keys_file import keys_path

    return keys_file or keys_path(get_settings())


def _fail(message: str, code: int = 2) -> typer.Exit:
    console.print(f"[red]{message}[/]", soft_wrap=True)
    return typer.Exit(code)


def _settings_for(keys_file: Optional[Path]):
    """The settings, their sealing keys file the one named (the rotator's Sealer reads it)."""
    settings = get_settings()
    if keys_file is None:
        return settings
    return settings.model_copy(update={"sealing": settings.sealing.model_copy(update={"keys_file": keys_file})})


@keys_app.command("rotate")
def keys_rotate(
    collection: Annotated[str, COLLECTION],
    keys_file: Annotated[Optional[Path], KEYS_FILE] = None,
    batch_size: Annotated[int, typer.Option(min=1, max=1000, help="documents resealed per request")] = 50,
    max_batches: Annotated[int, typer.Option(min=0, help="stop after this many batches (0: all); run the command "
                                                         "again to go on")] = 0,
):
    """Seal every record of a sealed collection with a fresh key: the key is added and made active at once,
    then both stores' records are sealed again in batches (vectors kept). Resumable: run it again after an
    interruption (kill -9 included) and it finishes the same rotation."""
    from hybridsearch.storage.holds import Held
    from hybridsearch.security.sealing import SealingError
    from hybridsearch.security.keys_file import finish_rotation, start_rotation
    from hybridsearch.runtime.services import Store
    from hybridsearch.reconcile.rotate import Rotator

    path = _path(keys_file)
    try:
        key_id, resumed = start_rotation(path, collection)
    except (OSError, ValueError) as err:
        raise _fail(str(err)) from None
    console.print(f"{'resuming the rotation of' if resumed else 'rotating'} {collection!r} to key {key_id} "
                  f"({'already' if resumed else 'now'} active in {path}: new records are sealed with it)")

    async def run():
        rotator = Rotator(_settings_for(keys_file), batch_size)
        try:
            with progress_bar() as bar:
                tasks = {}

                def advance(store, done: int, total: int) -> None:
                    if store not in tasks:
                        tasks[store] = bar.add_task(f"{store.value}: resealing", total=total)
                    bar.update(tasks[store], completed=done)
                    if not console.is_terminal:  # a log line per batch where no bar is drawn
                        console.print(f"{store.value}: {done}/{total} documents resealed")

                return await rotator.run(collection, advance, max_batches)
        finally:
            await rotator.close()

    try:
        rotation = asyncio.run(run())
    except Held as err:
        raise _fail(f"{err}: run `keys rotate` again once that ends") from None
    except SealingError as err:
        raise _fail(str(err)) from None
    if not rotation.held:
        console.print(f"[yellow]{collection} was resealed unheld (Redis not reachable)[/]")
    console.print(f"resealed: {rotation.resealed[Store.BM25]} documents in bm25, {rotation.resealed[Store.VECTOR]} in vector"
                  + (f" (written meanwhile, already under the new key: {sum(rotation.skipped.values())})"
                     if any(rotation.skipped.values()) else ""))
    if not rotation.done:
        left = {k: n for counts in rotation.left.values() for k, n in counts.items() if n}
        console.print(f"[yellow]not finished: records under old keys remain ({', '.join(f'{k}: {n}' for k, n in sorted(left.items()))}); "
                      f"run `hybridsearch keys rotate -c {collection}` again to go on[/]", soft_wrap=True)
        raise typer.Exit(3)
    finish_rotation(path, collection, key_id)
    from hybridsearch.security.keys_file import KeysFile

    keys = KeysFile(path).collection(collection)
    unused = rotation.unused(keys.key_ids if keys else [])
    console.print(f"every record of {collection!r} is sealed with key {key_id}"
                  + (f"; no record uses {', '.join(unused)} any more: retire "
                     + " and ".join(f"with `hybridsearch keys retire -c {collection} --key {k}`" for k in unused)
                     if unused else ""), soft_wrap=True)


@keys_app.command("retire")
def keys_retire(
    collection: Annotated[str, COLLECTION],
    key: Annotated[str, typer.Option("--key", help="the key id to remove")],
    keys_file: Annotated[Optional[Path], KEYS_FILE] = None,
):
    """Remove an old key of a sealed collection from the keys file; refused while any record in either store
    is still sealed with it (`keys rotate` first) or while it is the active key."""
    from hybridsearch.security.keys_file import KeysFile, retire_key
    from hybridsearch.reconcile.rotate import Rotator

    path = _path(keys_file)
    keys = KeysFile(path).collection(collection)
    if keys is None or keys.destroyed is not None or key not in keys.keys:
        raise _fail(f"collection {collection!r} has no key {key!r} in {path}")
    if key == keys.active:
        raise _fail(f"key {key} is the active key of {collection!r}: new records are sealed with it")

    async def counts():
        rotator = Rotator(get_settings())
        try:
            return await rotator.counts(collection)
        finally:
            await rotator.close()

    import grpc

    try:
        in_use = {store.value: c[key] for store, c in asyncio.run(counts()).items() if c[key]}
    except grpc.RpcError as err:
        raise _fail(f"the stores cannot be asked whether a record still uses key {key} ({err.code().name}): "
                    "kept") from None
    if in_use:
        raise _fail(f"key {key} still seals records of {collection!r} "
                    f"({', '.join(f'{s}: {n} documents' for s, n in in_use.items())}): "
                    f"run `hybridsearch keys rotate -c {collection}` first")
    try:
        retire_key(path, collection, key)
    except (OSError, ValueError) as err:
        raise _fail(str(err)) from None
    console.print(f"key {key} of {collection!r} removed from {path}: no record used it")


@keys_app.command("adopt")
def keys_adopt(
    collection: Annotated[str, typer.Option("--collection", "-c", help="the name a sealed snapshot is restored as")],
    source: Annotated[str, typer.Option("--from", help="the sealed collection the snapshot was taken of")],
    keys_file: Annotated[Optional[Path], KEYS_FILE] = None,
):
    """Give a new name copies of a sealed collection's keys and the name its records are sealed under, so a
    snapshot of it restores as that name (`snapshot restore LOCATION -c NAME`) and opens there. The copies are
    the new collection's own from then on: rotating or destroying one collection's keys leaves the other's."""
    from hybridsearch.security.keys_file import adopt_keys

    settings = get_settings()
    path = _path(keys_file)
    try:
        key_ids = adopt_keys(path, collection, source)
    except (OSError, ValueError) as err:
        raise _fail(str(err)) from None
    config = settings.collections.get(collection)
    declared = "" if config is not None and config.sealed else (
        f"; declare {collection!r} as {source!r} is (`sealed: true`) in the collections settings before restoring")
    console.print(f"keys {', '.join(key_ids)} of {source!r} copied for {collection!r} in {path} (0600; no key is "
                  f"shown): records restored from its snapshots open under the name they were sealed in{declared}")


@keys_app.command("destroy")
def keys_destroy(
    collection: Annotated[str, COLLECTION],
    yes: Annotated[bool, typer.Option("--yes", help="do not ask for confirmation")] = False,
    keys_file: Annotated[Optional[Path], KEYS_FILE] = None,
):
    """Crypto-shred a sealed collection: its keys leave the keys file at once (a tombstone records when), so
    no record of it opens from then on; then its data is dropped from both stores and Redis. A search or a
    write on it is refused with the reason until `keys create -c NAME` starts the name afresh."""
    from hybridsearch.security.keys_file import KeysFile, destroy_keys

    settings = get_settings()
    config = settings.collections.get(collection)
    path = _path(keys_file)
    keys = KeysFile(path).collection(collection)
    if keys is None:
        raise _fail(f"collection {collection!r} has no key in {path}: only a sealed collection's key is destroyed "
                    "(`hybridsearch collections drop` drops a plain one)")
    if keys.destroyed is None and not yes:
        sealed = "" if config is not None and config.sealed else " (it is not declared sealed in these settings)"
        typer.confirm(f"destroy every key of {collection!r}{sealed} and drop its data? No record of it can be "
                      "opened afterwards", abort=True)
    try:
        destroyed = destroy_keys(path, collection)
    except (OSError, ValueError) as err:
        raise _fail(str(err)) from None
    console.print(f"keys {', '.join(destroyed.key_ids)} of {collection!r} destroyed at {destroyed.at} "
                  f"(removed from {path}): no record of it opens any more; dropping its data")
    from hybridsearch.contract.errors import Refusal

    try:
        dropped = asyncio.run(_drop(collection))
    except Refusal as err:
        raise _fail(f"the keys are destroyed, the drop did not complete: {err}; run `keys destroy -c {collection}` "
                    "again to drop it") from None
    console.print(f"dropped {collection!r}: {dropped.documents} documents, {dropped.chunks} chunks, "
                  f"{dropped.cache_entries} Redis entries")


async def _drop(collection: str):
    """The gateway's drop (gateway/resources/drop.py) run from here: both stores and Redis, under the collection's hold."""
    from hybridsearch.gateway.backends import Backends
    from hybridsearch.gateway.resources.drop import Dropper

    settings = get_settings()
    backends = Backends.connect(settings)
    state = settings.redis.state()
    cache = settings.redis.cache(timeout_s=5)
    try:
        return await Dropper(backends, state, cache).drop(collection)
    finally:
        await backends.close()
        await state.aclose()
        await cache.aclose()
