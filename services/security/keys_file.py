"""The sealing keys file and the key lifecycle: each collection's 256-bit keys, made, rotated, retired and
destroyed (`hybridsearch keys ...`), the file written 0600 and atomically, reread when it changes.
security/sealing.py seals and hashes with the keys it holds.

**The key lifecycle** (docs/security.md): `keys rotate` adds a fresh key, makes it active and marks the
entry `rotating: <its id>` until every record is sealed with it (reconcile/rotate.py); meanwhile records
hashed under several keys coexist, so what a query matches is hashed under every key the collection holds
(`CollectionSeal.digests`, active first: filters, boosts, the tag leg). `keys retire` removes a key no record
uses; `keys destroy` replaces the entry by a tombstone, after which the collection's records open no more.

**Keys adopted under another name** (`keys adopt -c NEW --from OLD`): a sealed record carries the name of the
collection it was sealed in as associated data, so a snapshot of OLD restored as NEW (snapshots/coordinator.py)
opens only with OLD's keys *and* OLD's name. The entry NEW gets holds copies of OLD's keys and `sealed_as: OLD`,
the name its records (old and new alike) are sealed under. The two entries are independent from then on: a
rotation or a destroy of one leaves the other as it was.
"""

from __future__ import annotations

import base64
import secrets
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import yaml
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from hybridsearch.contract.validation import COLLECTION_NAME
from hybridsearch.security.apikeys import write_private

KEY_BYTES = 32
KEYS_FILE = "keys.yaml"
KEY_ID_HEX = 8
HEADER = ("# hybridsearch collection keys (hybridsearch keys create -c NAME): whoever reads this file reads the\n"
          "# sealed collections; keep it 0600, back it up apart from the data. docs/security.md\n")


def keys_path(settings) -> Path:
    """The sealing keys file these settings name (data_dir/sealing/keys.yaml unless set)."""
    return settings.sealing.keys_file or settings.data_dir / "sealing" / KEYS_FILE


def _derive(key: bytes, purpose: bytes) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=KEY_BYTES, salt=None, info=b"hybridsearch/" + purpose).derive(key)


@dataclass(frozen=True)
class CollectionKey:
    """One key of a collection: its id and the two keys derived from it (never shown: see __repr__)."""

    key_id: str
    seal_key: bytes = field(repr=False)
    hash_key: bytes = field(repr=False)

    @classmethod
    def from_secret(cls, key_id: str, secret: bytes) -> "CollectionKey":
        if len(secret) != KEY_BYTES:
            raise ValueError(f"key {key_id} is {len(secret)} bytes; a collection key is {KEY_BYTES}")
        return cls(key_id, _derive(secret, b"seal/v1"), _derive(secret, b"hash/v1"))


@dataclass(frozen=True)
class Destroyed:
    """The tombstone `keys destroy` leaves: when the collection's keys were destroyed, and their ids."""

    at: str
    key_ids: tuple[str, ...]


@dataclass(frozen=True)
class CollectionKeys:
    """A collection's keys by id, the one new records are sealed with, the key a rotation is sealing every
    record with (until it is done), or the tombstone of destroyed keys (then no key at all)."""

    active: str
    keys: dict[str, CollectionKey]
    rotating: str = ""
    destroyed: Destroyed | None = None
    sealed_as: str = ""  # the name its records are sealed under when not its own (keys adopt)

    @property
    def key_ids(self) -> list[str]:
        """Every key id, the active one first."""
        return sorted(self.keys, key=lambda key_id: (key_id != self.active, key_id))


def parse_keys_file(text: str, where: str) -> dict[str, CollectionKeys]:
    """The keys file's collections; ValueError naming the entry that is wrong (never a key's bytes)."""
    raw = yaml.safe_load(text) or {}
    if not isinstance(raw, dict) or not isinstance(raw.get("collections", {}), dict):
        raise ValueError(f"{where}: expected `collections:` mapping collection names to their keys")
    out = {}
    for name, entry in (raw.get("collections") or {}).items():
        if not COLLECTION_NAME.fullmatch(str(name)) or not isinstance(entry, dict):
            raise ValueError(f"{where}: collection {name!r} is not a collection name with `active` and `keys`")
        if isinstance(tomb := entry.get("destroyed"), dict):
            out[str(name)] = CollectionKeys("", {}, destroyed=Destroyed(
                str(tomb.get("at", "")), tuple(str(k) for k in tomb.get("key_ids") or ())))
            continue
        keys = {}
        for key_id, secret in (entry.get("keys") or {}).items():
            try:
                keys[str(key_id)] = CollectionKey.from_secret(str(key_id), base64.b64decode(str(secret), validate=True))
            except ValueError as err:
                raise ValueError(f"{where}: collection {name!r} key {key_id}: not base64 of {KEY_BYTES} bytes "
                                 f"({type(err).__name__})") from None
        active = str(entry.get("active", ""))
        if active not in keys:
            raise ValueError(f"{where}: collection {name!r}: active key {active!r} is not among its keys")
        rotating = str(entry.get("rotating") or "")
        if rotating and rotating not in keys:
            raise ValueError(f"{where}: collection {name!r}: rotating to key {rotating!r}, which is not among its keys")
        sealed_as = str(entry.get("sealed_as") or "")
        if sealed_as and not COLLECTION_NAME.fullmatch(sealed_as):
            raise ValueError(f"{where}: collection {name!r}: sealed_as {sealed_as[:80]!r} is not a collection name")
        out[str(name)] = CollectionKeys(active, keys, rotating, sealed_as=sealed_as)
    return out


def _load(path: Path, collection: str) -> tuple[dict, dict]:
    """(the keys file as written, its `collections` mapping); ValueError when it is not valid."""
    if not COLLECTION_NAME.fullmatch(collection):
        raise ValueError(f"collection {collection!r} is not a collection name ([a-z0-9][a-z0-9_-]{{0,62}})")
    raw = (yaml.safe_load(path.read_text()) if path.exists() else None) or {}
    parse_keys_file(yaml.safe_dump(raw), str(path))  # the file as it is must be valid before it is changed
    return raw, raw.setdefault("collections", {})


def _save(path: Path, raw: dict) -> None:
    write_private(path, HEADER + yaml.safe_dump(raw, sort_keys=True))  # 0600, atomically (a rename)


def _new_key(keys: dict) -> str:
    key_id = secrets.token_hex(KEY_ID_HEX // 2)
    while key_id in keys:
        key_id = secrets.token_hex(KEY_ID_HEX // 2)
    keys[key_id] = base64.b64encode(secrets.token_bytes(KEY_BYTES)).decode()
    return key_id


def _live_entry(collections: dict, collection: str, path: Path) -> dict:
    entry = collections.get(collection)
    if entry is None:
        raise ValueError(f"collection {collection!r} has no key in {path}: `hybridsearch keys create -c {collection}`")
    if "destroyed" in entry:
        raise ValueError(f"collection {collection!r} was erased: its key was destroyed at {entry['destroyed']['at']}")
    return entry


def create_collection_key(path: Path, collection: str) -> str:
    """Adds a fresh key for `collection` to the keys file (made 0600 if missing) and makes it the active one;
    returns its id. Refuses a collection that already has a key (rotation replaces keys, not this); one whose
    keys were destroyed starts afresh (its tombstone goes)."""
    raw, collections = _load(path, collection)
    if collection in collections and "destroyed" not in collections[collection]:
        raise ValueError(f"collection {collection!r} already has a key ({collections[collection]['active']}) in {path}")
    keys: dict[str, str] = {}
    collections[collection] = {"active": _new_key(keys), "keys": keys}
    _save(path, raw)
    return collections[collection]["active"]


def adopt_keys(path: Path, collection: str, source: str) -> list[str]:
    """Gives `collection` copies of `source`'s keys and the name `source`'s records are sealed under, so a
    snapshot of `source` restored as `collection` opens; returns the key ids copied. Refuses a collection that
    already has a key, and a source without live keys."""
    raw, collections = _load(path, collection)
    if collection == source:
        raise ValueError(f"collection {collection!r} cannot adopt its own keys")
    if collection in collections and "destroyed" not in collections[collection]:
        raise ValueError(f"collection {collection!r} already has keys ({collections[collection]['active']}) in "
                         f"{path}: a restore under this name needs {source!r}'s: `keys destroy -c {collection}` first "
                         "if it holds nothing worth keeping")
    entry = _live_entry(collections, source, path)
    collections[collection] = {"active": entry["active"], "keys": dict(entry["keys"]),
                               "sealed_as": entry.get("sealed_as") or source}
    _save(path, raw)
    return sorted(entry["keys"])


def start_rotation(path: Path, collection: str) -> tuple[str, bool]:
    """(the key a rotation seals every record with, whether an unfinished rotation to it is resumed): a
    fresh key made active and marked `rotating`, unless the entry is still rotating to its active key."""
    raw, collections = _load(path, collection)
    entry = _live_entry(collections, collection, path)
    if entry.get("rotating") == entry["active"]:
        return entry["active"], True
    entry["active"] = entry["rotating"] = _new_key(entry["keys"])
    _save(path, raw)
    return entry["active"], False


def finish_rotation(path: Path, collection: str, key_id: str) -> None:
    """Every record is sealed with `key_id`: the entry is no longer rotating to it."""
    raw, collections = _load(path, collection)
    entry = _live_entry(collections, collection, path)
    if entry.get("rotating") == key_id:
        del entry["rotating"]
        _save(path, raw)


def retire_key(path: Path, collection: str, key_id: str) -> None:
    """Removes a key that is not the active one (the caller made sure no record uses it)."""
    raw, collections = _load(path, collection)
    entry = _live_entry(collections, collection, path)
    if key_id not in entry["keys"]:
        raise ValueError(f"collection {collection!r} has no key {key_id!r} (its keys: {', '.join(sorted(entry['keys']))})")
    if key_id == entry["active"]:
        raise ValueError(f"key {key_id} is the active key of {collection!r}: new records are sealed with it")
    del entry["keys"][key_id]
    _save(path, raw)


def destroy_keys(path: Path, collection: str, now: datetime | None = None) -> Destroyed:
    """Removes every key of `collection` from the keys file at once, a tombstone in their place (the file is
    replaced by a rename: no reader sees half of it); the tombstone already there when they were destroyed
    before."""
    raw, collections = _load(path, collection)
    entry = collections.get(collection)
    if entry is None:
        raise ValueError(f"collection {collection!r} has no key in {path}: nothing to destroy")
    if "destroyed" not in entry:
        at = (now or datetime.now(timezone.utc)).strftime("%Y-%m-%dT%H:%M:%SZ")
        collections[collection] = {"destroyed": {"at": at, "key_ids": sorted(entry.get("keys") or {})}}
        _save(path, raw)
    tomb = collections[collection]["destroyed"]
    return Destroyed(tomb["at"], tuple(tomb["key_ids"]))


@dataclass
class KeysFile:
    """The keys file, reread when it changes (mtime, size or inode: a Secret's symlink swap too)."""

    path: Path
    _stamp: tuple[int, int, int] | None = None
    _collections: dict[str, CollectionKeys] = field(default_factory=dict)

    def collection(self, name: str) -> CollectionKeys | None:
        try:
            st = self.path.stat()
        except OSError:
            return None
        stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
        if stamp != self._stamp:
            self._collections = parse_keys_file(self.path.read_text(), str(self.path))
            self._stamp = stamp
        return self._collections.get(name)
