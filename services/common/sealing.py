"""Sealed at rest: a collection's key, sealing and opening its records, keyed hashes of what is matched.

A collection declared `sealed: true` (CollectionConfig) has a 256-bit key in the sealing keys file
(`sealing.keys_file`, default `data_dir/sealing/keys.yaml`, mode 0600; a mounted Kubernetes Secret works the
same way), made by `hybridsearch keys create -c NAME`:

    collections:
      notes:
        active: 5c1e07a2              # the key id new records are sealed with
        keys: {5c1e07a2: <base64 of 32 random bytes>}

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
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import yaml
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from hybridsearch.common.apikeys import write_private
from hybridsearch.common.collections import CollectionConfig, collection_config
from hybridsearch.common.tags import query_keywords, split_tags
from hybridsearch.common.validation import COLLECTION_NAME, Refusal
from hybridsearch.v1 import common_pb2

KEY_BYTES = 32
NONCE_BYTES = 12
VERSION = b"\x01"  # the blob's first byte: this layout (nonce, AES-256-GCM ciphertext and tag)
HASH_HEX = 32  # 128 bits of HMAC-SHA256: equality only, no collision within reach
KEYS_FILE = "keys.yaml"
KEY_ID_HEX = 8


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
class CollectionKeys:
    """A collection's keys by id, and the one new records are sealed with."""

    active: str
    keys: dict[str, CollectionKey]


def parse_keys_file(text: str, where: str) -> dict[str, CollectionKeys]:
    """The keys file's collections; ValueError naming the entry that is wrong (never a key's bytes)."""
    raw = yaml.safe_load(text) or {}
    if not isinstance(raw, dict) or not isinstance(raw.get("collections", {}), dict):
        raise ValueError(f"{where}: expected `collections:` mapping collection names to their keys")
    out = {}
    for name, entry in (raw.get("collections") or {}).items():
        if not COLLECTION_NAME.fullmatch(str(name)) or not isinstance(entry, dict):
            raise ValueError(f"{where}: collection {name!r} is not a collection name with `active` and `keys`")
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
        out[str(name)] = CollectionKeys(active, keys)
    return out


def create_collection_key(path: Path, collection: str) -> str:
    """Adds a fresh key for `collection` to the keys file (made 0600 if missing) and makes it the active one;
    returns its id. Refuses a collection that already has a key (rotation replaces keys, not this)."""
    if not COLLECTION_NAME.fullmatch(collection):
        raise ValueError(f"collection {collection!r} is not a collection name ([a-z0-9][a-z0-9_-]{{0,62}})")
    raw = (yaml.safe_load(path.read_text()) if path.exists() else None) or {}
    parse_keys_file(yaml.safe_dump(raw), str(path))  # the file as it is must be valid before it is extended
    collections = raw.setdefault("collections", {})
    if collection in collections:
        raise ValueError(f"collection {collection!r} already has a key ({collections[collection]['active']}) in {path}")
    key_id = secrets.token_hex(KEY_ID_HEX // 2)
    collections[collection] = {"active": key_id,
                               "keys": {key_id: base64.b64encode(secrets.token_bytes(KEY_BYTES)).decode()}}
    header = ("# hybridsearch collection keys (hybridsearch keys create -c NAME): whoever reads this file reads the\n"
              "# sealed collections; keep it 0600, back it up apart from the data. docs/security.md\n")
    write_private(path, header + yaml.safe_dump(raw, sort_keys=True))
    return key_id


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


def _hmac(key: CollectionKey, parts: tuple[str, ...]) -> str:
    return hmac.new(key.hash_key, "\x1f".join(parts).encode(), hashlib.sha256).hexdigest()[:HASH_HEX]


class CollectionSeal:
    """Seals, opens and hashes for one collection with its keys."""

    def __init__(self, collection: str, keys: CollectionKeys, config: CollectionConfig) -> None:
        self.collection, self.keys, self.config = collection, keys, config
        self.active = keys.keys[keys.active]

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
        content = common_pb2.Chunk(title=chunk.title, heading=chunk.heading, text=chunk.text, metadata=chunk.metadata)
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

    def open_chunk(self, chunk: common_pb2.Chunk) -> common_pb2.Chunk:
        """A stored chunk with its title, heading, text and metadata in clear (unsealed chunks as they are)."""
        if not chunk.HasField("sealed"):
            return chunk
        content = self.open_content(chunk.chunk_id, chunk.sealed)
        out = common_pb2.Chunk()
        out.CopyFrom(chunk)
        out.ClearField("sealed")
        out.title, out.heading, out.text = content.title, content.heading, content.text
        out.metadata.clear()
        out.metadata.update(content.metadata)
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

    def digest(self, *parts: str) -> str:
        return _hmac(self.active, parts)

    def digests(self, *parts: str) -> list[str]:
        """One digest of `parts` per key the collection holds, the active key's first: what a query matches
        while records hashed under an older key and the active one coexist (a rotation under way)."""
        ids = [self.keys.active, *sorted(k for k in self.keys.keys if k != self.keys.active)]
        return [_hmac(self.keys.keys[key_id], parts) for key_id in ids]

    def hash_value(self, field_name: str, value: str) -> str:
        """A metadata value as stored and matched; the tags field's value is its tags' hashes, comma-joined
        (the tag leg splits it as it splits clear tags)."""
        if field_name == self.config.tags_field:
            return ",".join(self.digest("tag", tag) for tag in split_tags(value))
        return self.digest("meta", field_name, value)

    def hashed_metadata(self, metadata) -> dict[str, str]:
        return {k: self.hash_value(k, v) for k, v in metadata.items()}

    def hashed_filters(self, filters: Iterable[common_pb2.MetadataFilter]) -> list[common_pb2.MetadataFilter]:
        """A request's filters with their values hashed as the stores hold them."""
        out = []
        for f in filters:
            hashed = common_pb2.MetadataFilter(field=f.field)
            which = f.WhichOneof("condition")
            if which == "any_of":
                hashed.any_of.values.extend(self.hash_value(f.field, v) for v in f.any_of.values)
            elif which is not None:
                setattr(hashed, which, self.hash_value(f.field, getattr(f, which)))
            out.append(hashed)
        return out

    def tag_query(self, text: str) -> str:
        """What the tag leg is sent for a query: its keywords' tag hashes, space-separated (each hash a word
        of its own, so the leg's keyword split finds exactly them)."""
        return " ".join(self.digest("tag", k) for k in query_keywords(text))


class Sealer:
    """This process's view of the sealed collections: which are sealed (settings) and their keys (keys file)."""

    def __init__(self, settings, path: Path | None = None) -> None:
        self.settings = settings
        self.file = KeysFile(path or keys_path(settings))

    def sealed(self, collection: str) -> bool:
        return collection_config(self.settings, collection).sealed

    def of(self, collection: str) -> CollectionSeal | None:
        """The collection's seal; None for a collection that is not sealed; SealingError when it is sealed
        and has no usable key."""
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
        return CollectionSeal(collection, keys, config)
