"""Sealed at rest: a collection's key, sealing and opening its records, keyed hashes of what is matched.

A collection declared `sealed: true` (CollectionConfig) has a 256-bit key in the sealing keys file
(`sealing.keys_file`, default `data_dir/sealing/keys.yaml`, mode 0600; a mounted Kubernetes Secret works the
same way), made by `hybridsearch keys create -c NAME`:

    collections:
      notes:
        active: 5c1e07a2              # the key id new records are sealed with
        keys: {5c1e07a2: <base64 of 32 random bytes>}
      erased:                         # `keys destroy -c erased`: its keys gone, a tombstone in their place
        destroyed: {at: "2025-01-31T09:12:03Z", key_ids: [0d9e4c11]}

Two keys are derived from it (HKDF-SHA256): one seals, one hashes.

- **Sealing**: AES-256-GCM of a chunk's title, heading, text and metadata (a `Chunk` message holding only
  those), a fresh 96-bit nonce each time, the associated data the collection and the chunk id, so a record
  copied into another collection or onto another chunk does not open. Stored as `Sealed(blob, key_id)`:
  the key id beside every record says which key opens it.
- **Keyed hashes** (HMAC-SHA256, 128 bits in hex): metadata values (per field) and tags, so the stores
  match filters, the tag leg and boosts on equality without holding a value in clear; a content hash
  keyed the same way, so a stored hash confirms no guessed document.

Only the gateway (and the processes that read sealed texts: expansion's feedback probe, reconcile) hold
keys; the stores never do, and no key ever travels in an RPC. A key is never logged: `CollectionKey`'s repr
names its id only. A sealed collection without a key, a record whose key id is unknown, or one that does
not open is a `SealingError` (FAILED_PRECONDITION, with the reason), never garbage.

**The key lifecycle** (docs/security.md): `keys rotate` adds a fresh key, makes it active and marks the
entry `rotating: <its id>` until every record is sealed with it (reconcile/rotate.py); meanwhile records
hashed under several keys coexist, so what a query matches is hashed under every key the collection holds
(`CollectionSeal.digests`, active first: filters, boosts, the tag leg). `keys retire` removes a key no record
uses; `keys destroy` replaces the entry by a tombstone, after which the collection's records open no more.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import grpc
import yaml
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from hybridsearch.security.apikeys import write_private
from hybridsearch.config.collections import CollectionConfig, collection_config
from hybridsearch.text.tags import query_keywords, split_tags
from hybridsearch.contract.validation import COLLECTION_NAME, Refusal, split_generation
from hybridsearch.v1 import common_pb2

KEY_BYTES = 32
NONCE_BYTES = 12
VERSION = b"\x01"  # the blob's first byte: this layout (nonce, AES-256-GCM ciphertext and tag)
HASH_HEX = 32  # 128 bits of HMAC-SHA256: equality only, no collision within reach
KEYS_FILE = "keys.yaml"
KEY_ID_HEX = 8
HEADER = ("# hybridsearch collection keys (hybridsearch keys create -c NAME): whoever reads this file reads the\n"
          "# sealed collections; keep it 0600, back it up apart from the data. docs/security.md\n")


class SealingError(Refusal):
    """A sealed collection's record cannot be sealed or opened: FAILED_PRECONDITION, with the reason."""

    code = grpc.StatusCode.FAILED_PRECONDITION


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
        out[str(name)] = CollectionKeys(active, keys, rotating)
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


class CollectionSeal:
    """Seals, opens and hashes for one collection with its keys."""

    def __init__(self, collection: str, keys: CollectionKeys, config: CollectionConfig) -> None:
        self.collection, self.keys, self.config = collection, keys, config
        self.active = keys.keys[keys.active]
        self.every = [keys.keys[key_id] for key_id in keys.key_ids]  # the active key first

    def __repr__(self) -> str:
        return f"CollectionSeal({self.collection!r}, active={self.keys.active})"

    def _aad(self, record: str) -> bytes:
        return f"{self.collection}\x1f{record}".encode()

    # --- sealing -----------------------------------------------------------------------------------------

    def seal(self, record: str, plain: bytes) -> common_pb2.Sealed:
        """`plain` sealed for `record` (a chunk id) of this collection with the active key."""
        nonce = os.urandom(NONCE_BYTES)
        blob = VERSION + nonce + AESGCM(self.active.seal_key).encrypt(nonce, plain, self._aad(record))
        return common_pb2.Sealed(blob=blob, key_id=self.active.key_id)

    def open(self, record: str, sealed: common_pb2.Sealed) -> bytes:
        key = self.keys.keys.get(sealed.key_id)
        if key is None:
            raise SealingError(f"collection {self.collection!r}: record {record!r} was sealed with key "
                               f"{sealed.key_id or '(none)'}, which is not in the keys file: restore that key")
        blob = sealed.blob
        if blob[:1] != VERSION or len(blob) < 1 + NONCE_BYTES + 16:
            raise SealingError(f"collection {self.collection!r}: record {record!r} is not a sealed record")
        try:
            return AESGCM(key.seal_key).decrypt(blob[1:1 + NONCE_BYTES], blob[1 + NONCE_BYTES:], self._aad(record))
        except InvalidTag:
            raise SealingError(f"collection {self.collection!r}: record {record!r} does not open with key "
                               f"{key.key_id}: a different key under that id, a record of another collection or "
                               "chunk, or a damaged record") from None

    def seal_chunk(self, chunk: common_pb2.Chunk) -> common_pb2.Chunk:
        """What the stores are sent for a chunk: the clear fields to index (never stored), the sealed content,
        metadata values as keyed hashes and the declared text fields' clear values to index."""
        content = common_pb2.Chunk(title=chunk.title, heading=chunk.heading, text=chunk.text, metadata=chunk.metadata,
                                   content_hash=chunk.content_hash)  # the clear hash: a rotation keys it anew
        out = common_pb2.Chunk()
        out.CopyFrom(chunk)
        out.metadata.clear()
        out.metadata.update(self.hashed_metadata(chunk.metadata))
        out.indexed_metadata.update({k: v for k, v in chunk.metadata.items() if k in self.config.fields})
        out.content_hash = self.digest("content", chunk.content_hash)
        out.sealed.CopyFrom(self.seal(chunk.chunk_id, content.SerializeToString()))
        return out

    def open_content(self, chunk_id: str, sealed: common_pb2.Sealed) -> common_pb2.Chunk:
        """The clear title, heading, text and metadata of a sealed record."""
        return common_pb2.Chunk.FromString(self.open(chunk_id, sealed))

    def open_chunk(self, chunk: common_pb2.Chunk, content: common_pb2.Chunk | None = None) -> common_pb2.Chunk:
        """A stored chunk with its title, heading, text and metadata in clear (unsealed chunks as they are);
        `content`: its record already opened."""
        if not chunk.HasField("sealed"):
            return chunk
        content = content or self.open_content(chunk.chunk_id, chunk.sealed)
        out = common_pb2.Chunk()
        out.CopyFrom(chunk)
        out.ClearField("sealed")
        out.title, out.heading, out.text = content.title, content.heading, content.text
        out.metadata.clear()
        out.metadata.update(content.metadata)
        return out

    def reseal(self, chunk: common_pb2.Chunk) -> common_pb2.Chunk:
        """A stored sealed chunk as the gateway would write it now (`keys rotate`): opened, then sealed and
        hashed with the active key. Its content hash keyed anew from the clear one inside the record (a record
        sealed before it held one: its stored keyed hash, keyed again, the same in both stores)."""
        content = self.open_content(chunk.chunk_id, chunk.sealed)
        plain = self.open_chunk(chunk, content)
        plain.content_hash = content.content_hash
        out = self.seal_chunk(plain)
        if not content.content_hash:
            out.content_hash = self.digest("content-rekeyed", chunk.content_hash)
        return out

    def copyable(self, chunk: common_pb2.Chunk) -> common_pb2.Chunk:
        """A stored sealed chunk as another store is sent it (reconcile's copy): the same sealed record, hashes
        and keyed content hash, with the clear fields it indexes opened from the record."""
        if not chunk.HasField("sealed"):
            return chunk
        content = self.open_content(chunk.chunk_id, chunk.sealed)
        out = common_pb2.Chunk()
        out.CopyFrom(chunk)
        out.title, out.heading, out.text = content.title, content.heading, content.text
        out.indexed_metadata.update({k: v for k, v in content.metadata.items() if k in self.config.fields})
        return out

    # --- keyed hashes --------------------------------------------------------------------------------------

    @staticmethod
    def _mac(key: CollectionKey, parts: tuple[str, ...]) -> str:
        return hmac.new(key.hash_key, "\x1f".join(parts).encode(), hashlib.sha256).hexdigest()[:HASH_HEX]

    def digest(self, *parts: str) -> str:
        """The keyed hash of `parts` with the active key: what a record is written with."""
        return self._mac(self.active, parts)

    def digests(self, *parts: str) -> list[str]:
        """The keyed hash of `parts` under every key the collection holds, the active key's first: what a
        query matches, since records written under an older key keep its hashes until a rotation reseals them.
        The one place every matching caller (filters, boosts, the tag leg, hashed BM25 terms) goes through."""
        return [self._mac(key, parts) for key in self.every]

    def hash_value(self, field_name: str, value: str) -> str:
        """A metadata value as stored (the active key's); the tags field's value is its tags' hashes,
        comma-joined (the tag leg splits it as it splits clear tags)."""
        return self.hash_values(field_name, value)[0]

    def hash_values(self, field_name: str, value: str) -> list[str]:
        """A metadata value as stored under each of the collection's keys, the active key's first."""
        if field_name == self.config.tags_field:
            per_tag = [self.digests("tag", tag) for tag in split_tags(value)]
            return [",".join(hashes) for hashes in zip(*per_tag)] if per_tag else ["" for _ in self.every]
        return self.digests("meta", field_name, value)

    def hashed_metadata(self, metadata) -> dict[str, str]:
        return {k: self.hash_value(k, v) for k, v in metadata.items()}

    def hashed_filters(self, filters: Iterable[common_pb2.MetadataFilter]) -> list[common_pb2.MetadataFilter]:
        """A request's filters with their values hashed as the stores hold them, under every key: equals and
        any_of match any of the values' hashes, not_equals excludes each of them (one filter per hash)."""
        out = []
        for f in filters:
            which = f.WhichOneof("condition")
            if which is None:
                out.append(common_pb2.MetadataFilter(field=f.field))
                continue
            values = list(f.any_of.values) if which == "any_of" else [getattr(f, which)]
            hashes = [h for v in values for h in self.hash_values(f.field, v)]
            if which == "not_equals":
                out += [common_pb2.MetadataFilter(field=f.field, not_equals=h) for h in hashes]
            elif which == "equals" and len(hashes) == 1:
                out.append(common_pb2.MetadataFilter(field=f.field, equals=hashes[0]))
            else:
                out.append(common_pb2.MetadataFilter(field=f.field, any_of=common_pb2.StringList(values=hashes)))
        return out

    def tag_query(self, text: str) -> str:
        """What the tag leg is sent for a query: its keywords' tag hashes under every key, space-separated
        (each hash a word of its own, so the leg's keyword split finds exactly them)."""
        return " ".join(h for k in query_keywords(text) for h in self.digests("tag", k))


class Sealer:
    """This process's view of the sealed collections: which are sealed (settings) and their keys (keys file)."""

    def __init__(self, settings, path: Path | None = None) -> None:
        self.settings = settings
        self.file = KeysFile(path or keys_path(settings))

    def sealed(self, collection: str) -> bool:
        return collection_config(self.settings, collection).sealed

    def of(self, collection: str) -> CollectionSeal | None:
        """The collection's seal; None for a collection that is not sealed; SealingError when it is sealed
        and has no usable key. A generation (`notes.g2`, gateway/resources/aliases.py) has its alias's: its records were
        sealed under the alias's name."""
        collection = split_generation(collection)[0]
        config = collection_config(self.settings, collection)
        if not config.sealed:
            return None
        try:
            keys = self.file.collection(collection)
        except (OSError, ValueError) as err:
            raise SealingError(f"collection {collection!r} is sealed and the sealing keys file cannot be read: "
                               f"{err}") from None
        if keys is None:
            raise SealingError(f"collection {collection!r} is sealed and has no key in {self.file.path}: "
                               f"make one with `hybridsearch keys create -c {collection}`")
        if keys.destroyed is not None:
            raise SealingError(f"collection {collection!r} was erased: its key was destroyed at {keys.destroyed.at} "
                               f"(`hybridsearch keys create -c {collection}` starts the name afresh)")
        return CollectionSeal(collection, keys, config)
