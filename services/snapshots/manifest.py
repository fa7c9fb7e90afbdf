"""What a snapshot holds, as one JSON document beside its pieces: each store's files (each file the sha256 of its
whole and of its pieces, the pieces content-addressed in the repository), the collection's settings (engine
options, embedder, analyzer, sealed key ids: never a key), where it stands in the write order, and a
checksum of all of it, so that a manifest changed by hand or cut short is refused, not restored."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timezone

from pydantic import BaseModel, Field, ValidationError

from hybridsearch.runtime.services import Store  # the stores a snapshot holds a part of, in order

FORMAT = 1  # the manifest's format; a restore refuses one it does not know


class StoredFile(BaseModel):
    """One file of a store's collection folder: its path in the folder, size, sha256, and its pieces' sha256s in
    order (each piece at most repository.PIECE_BYTES, stored compressed under its own sha256)."""

    path: str
    size: int
    sha256: str
    pieces: list[str]


class StorePart(BaseModel):
    """One store's part: its engine, what it held at the mark, and its files."""

    store: Store
    engine: str
    documents: int
    chunks: int
    files: list[StoredFile]
    details: dict[str, str] = Field(default_factory=dict)  # the engine's own (analyzer, segments, HNSW...)

    @property
    def size(self) -> int:
        return sum(f.size for f in self.files)


class Manifest(BaseModel):
    format: int = FORMAT
    id: str
    collection: str
    created_at: datetime
    # Where the snapshot stands: the writes this gateway acknowledged before the pause are in it, none after.
    write_pause_ms: float
    # The collection's declared settings (CollectionConfig), the vector leg's embedder and its model's
    # fingerprint, each store's analyzer: a restore checks that the target would be indexed the same way.
    collection_config: dict
    embedder: str
    embedder_fingerprint: str
    sealed_key_ids: list[str] = Field(default_factory=list)  # ids only: keys never leave the keys file
    sealed_as: str = ""  # the name a sealed collection's records are sealed under (security/keys_file.py adopt)
    parts: list[StorePart]
    bytes_total: int = 0  # the files' sizes
    bytes_new: int = 0  # what this snapshot wrote to the repository (pieces no earlier snapshot held), compressed
    checksum: str = ""  # sha256 of the manifest with this field empty

    def part(self, store: Store) -> StorePart:
        return next(p for p in self.parts if p.store == store)

    def pieces(self) -> set[str]:
        return {piece for part in self.parts for f in part.files for piece in f.pieces}

    def sealed(self) -> str:
        """The manifest as JSON, its checksum set."""
        body = self.model_copy(update={"checksum": ""})
        digest = hashlib.sha256(canonical(body)).hexdigest()
        return self.model_copy(update={"checksum": digest}).model_dump_json(indent=1)


class ManifestError(ValueError):
    """A manifest that is not one, or not whole: its checksum does not match, or its format is unknown."""


def canonical(manifest: Manifest) -> bytes:
    body = manifest.model_dump(mode="json")
    if not body["sealed_as"]:  # a field added later: the checksums of manifests written before it still hold
        del body["sealed_as"]
    return json.dumps(body, sort_keys=True, separators=(",", ":")).encode()


def parse(text: bytes | str, where: str) -> Manifest:
    """A manifest read back, checked whole; ManifestError saying what is wrong otherwise."""
    try:
        manifest = Manifest.model_validate_json(text)
    except ValidationError as err:
        raise ManifestError(f"{where} is not a snapshot manifest ({err.error_count()} errors: "
                            f"{err.errors()[0]['msg']} at {'.'.join(map(str, err.errors()[0]['loc']))})") from None
    if manifest.format != FORMAT:
        raise ManifestError(f"{where} has format {manifest.format}; this build restores format {FORMAT}")
    body = manifest.model_copy(update={"checksum": ""})
    if hashlib.sha256(canonical(body)).hexdigest() != manifest.checksum:
        raise ManifestError(f"{where} does not match its checksum: it was changed or cut short; restore "
                            "another snapshot")
    return manifest


def snapshot_id(collection: str, now: datetime | None = None) -> str:
    """`<collection>-<UTC time>`: sorts by time within a collection; unique to the second (and suffixed)."""
    now = now or datetime.now(timezone.utc)
    return f"{collection}-{now:%Y%m%dT%H%M%S}-{now.microsecond:06d}"
