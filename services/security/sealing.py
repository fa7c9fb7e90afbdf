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

The keys file and its lifecycle (create, rotate, retire, destroy) are security/keys_file.py.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from collections.abc import Iterable
from pathlib import Path

import grpc
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from hybridsearch.config.collections import CollectionConfig, collection_config
from hybridsearch.text.tags import query_keywords, split_tags
from hybridsearch.contract.validation import split_generation
from hybridsearch.contract.errors import Refusal
from hybridsearch.security.keys_file import CollectionKey, CollectionKeys, KeysFile, keys_path
from hybridsearch.v1 import common_pb2

NONCE_BYTES = 12
VERSION = b"\x01"  # the blob's first byte: this layout (nonce, AES-256-GCM ciphertext and tag)
HASH_HEX = 32  # 128 bits of HMAC-SHA256: equality only, no collision within reach


class SealingError(Refusal):
    """A sealed collection's record cannot be sealed or opened: FAILED_PRECONDITION, with the reason."""

    code = grpc.StatusCode.FAILED_PRECONDITION


class CollectionSeal:
    """Seals, opens and hashes for one collection with its keys."""

    def __init__(self, collection: str, keys: CollectionKeys, config: CollectionConfig) -> None:
        self.collection, self.keys, self.config = collection, keys, config
        self.active = keys.keys[keys.active]
        self.every = [keys.keys[key_id] for key_id in keys.key_ids]  # the active key first

    def __repr__(self) -> str:
        return f"CollectionSeal({self.collection!r}, active={self.keys.active})"

    def _aad(self, record: str) -> bytes:
        # the name the records are sealed under: the collection's own, or the one its keys were adopted from
        return f"{self.keys.sealed_as or self.collection}\x1f{record}".encode()

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
