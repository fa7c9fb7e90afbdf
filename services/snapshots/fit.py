"""Whether a snapshot fits the name it is restored as, refused with the reason before anything moves: the target
declared as the snapshot's collection was (engine options, language, fields, sealed), vectors that open with
the deployment's embedder or their own record, and a sealed snapshot's keys on file under the name its records
are sealed in (security/keys_file.py `keys adopt` for a new name)."""

from __future__ import annotations

import json

import grpc

from hybridsearch.config.collections import collection_config
from hybridsearch.config.settings import Settings
from hybridsearch.contract.errors import Refusal
from hybridsearch.security.keys_file import KeysFile
from hybridsearch.runtime.services import Store
from hybridsearch.snapshots.manifest import Manifest
from hybridsearch.storage.stores import COLLECTION_RECORD


def check_fits(settings: Settings, keys: KeysFile, manifest: Manifest, target: str) -> None:
    """Refuses a target that would not be indexed as the snapshot was, or whose keys are not on file."""
    declared = collection_config(settings, target).model_dump(mode="json")
    if declared != manifest.collection_config:
        differ = sorted(k for k in declared if declared[k] != manifest.collection_config.get(k))
        raise Refusal(f"collection {target!r} is declared otherwise than the snapshot's {manifest.collection!r} "
                      f"was ({', '.join(differ)}): declare it as {json.dumps(manifest.collection_config)} in the "
                      "collections file, or restore under a name declared so", grpc.StatusCode.FAILED_PRECONDITION)
    vector = manifest.part(Store.VECTOR)
    recorded = any(f.path.rsplit("/", 1)[-1] == COLLECTION_RECORD for f in vector.files)
    # a collection whose folder records its embedder (vector/store.py VectorSpace) restores with it; one
    # without a record is embedded with the deployment's default, which must then be the snapshot's
    if manifest.embedder != settings.vector.embedder and not recorded:
        raise Refusal(f"the snapshot's vectors are {manifest.embedder}'s; this deployment embeds with "
                      f"{settings.vector.embedder}: restore it where vector.embedder is {manifest.embedder}, "
                      "then re-index", grpc.StatusCode.FAILED_PRECONDITION)
    if manifest.sealed_key_ids:
        _keys_fit(keys, manifest, target)


def _keys_fit(keys: KeysFile, manifest: Manifest, target: str) -> None:
    """A sealed snapshot's records open in `target` only with the snapshot's key ids on file for `target`
    and under the name they were sealed in: `target`'s own, or the one its keys were adopted from."""
    sealed_as = manifest.sealed_as or manifest.collection
    held = keys.collection(target)
    backup = "put them back from the keys file's backup first"
    if held is None or held.destroyed is not None:
        adopt = "" if target == sealed_as else (
            f": `hybridsearch keys adopt -c {target} --from {manifest.collection}` gives it copies of "
            f"{manifest.collection!r}'s keys and the name its records are sealed under ({sealed_as!r})")
        raise Refusal(f"the snapshot's records are sealed with key ids {', '.join(manifest.sealed_key_ids)} and "
                      f"the sealing keys file ({keys.path}) holds no live key for {target!r}{adopt}; if "
                      f"{manifest.collection!r}'s keys are gone too, {backup}", grpc.StatusCode.FAILED_PRECONDITION)
    if (held.sealed_as or target) != sealed_as:
        raise Refusal(f"the snapshot's records are sealed under the name {sealed_as!r} and {target!r}'s keys seal "
                      f"under {held.sealed_as or target!r}: restore into a name without keys, after `hybridsearch "
                      f"keys adopt -c NAME --from {manifest.collection}`", grpc.StatusCode.FAILED_PRECONDITION)
    missing = sorted(set(manifest.sealed_key_ids) - set(held.key_ids))
    if missing:
        raise Refusal(f"the snapshot's records are sealed with key ids {', '.join(missing)}, which the sealing "
                      f"keys file ({keys.path}) does not hold for {target!r}: {backup}",
                      grpc.StatusCode.FAILED_PRECONDITION)
