"""Where snapshots are kept: a folder, or an S3 bucket (boto3), holding manifests and content-addressed pieces.

    <repository>/snapshots/<collection>/<snapshot id>.json   a manifest (manifest.py)
    <repository>/pieces/<sha256[:2]>/<sha256>.zst             a piece of a file: at most PIECE_BYTES, zstd

A file is cut into pieces of PIECE_BYTES, each stored once under the sha256 of its bytes: a second snapshot
writes only the pieces no snapshot holds yet (tantivy's immutable segments, the unchanged stretches of the
vector store's files), and every piece is checked against its name when it is read back. A snapshot's location
is its manifest's (`/backups/snapshots/notes/notes-20261128T101500-000123.json`,
`s3://bucket/prefix/snapshots/notes/...json`): the repository is the part before `/snapshots/`.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import zstandard

from hybridsearch.config.settings import Settings
from hybridsearch.snapshots.manifest import StoredFile

PIECE_BYTES = 4 * 1024 * 1024
MANIFESTS = "snapshots"
PIECES = "pieces"
S3 = "s3://"
LEVEL = 3  # zstd's default: ~400 MB/s a core here, and the zero-filled stretches of preallocated files vanish


class RepositoryError(RuntimeError):
    """A repository that cannot be read or written, or a snapshot that is not whole in it (a missing or
    corrupted piece); the message names what."""


class Repository(Protocol):
    location: str

    def read(self, key: str) -> bytes: ...
    def write(self, key: str, data: bytes) -> None: ...
    def exists(self, key: str) -> bool: ...
    def delete(self, key: str) -> None: ...
    def keys(self, prefix: str) -> Iterator[str]: ...


@dataclass
class FolderRepository:
    root: Path

    @property
    def location(self) -> str:
        return str(self.root)

    def _path(self, key: str) -> Path:
        return self.root / key

    def read(self, key: str) -> bytes:
        try:
            return self._path(key).read_bytes()
        except FileNotFoundError:
            raise RepositoryError(f"{self._path(key)} is not there") from None

    def write(self, key: str, data: bytes) -> None:
        """Whole or not at all: written beside, fsynced, renamed into place."""
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path.parent, prefix=".tmp-", delete=False) as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(f.name, path)

    def exists(self, key: str) -> bool:
        return self._path(key).exists()

    def delete(self, key: str) -> None:
        self._path(key).unlink(missing_ok=True)

    def keys(self, prefix: str) -> Iterator[str]:
        base = self._path(prefix)
        if base.is_dir():
            for path in sorted(base.rglob("*")):
                if path.is_file() and not path.name.startswith(".tmp-"):
                    yield path.relative_to(self.root).as_posix()


class S3Repository:
    """A bucket and a prefix, through boto3 (settings.snapshots: the endpoint of another S3-API server)."""

    def __init__(self, bucket: str, prefix: str, settings: Settings) -> None:
        import boto3
        from botocore.config import Config

        self.bucket, self.prefix = bucket, prefix.strip("/")
        cfg = settings.snapshots
        self.client = boto3.client("s3", endpoint_url=cfg.s3_endpoint_url, region_name=cfg.s3_region,
                                   config=Config(retries={"max_attempts": 5, "mode": "standard"}))

    @property
    def location(self) -> str:
        return f"{S3}{self.bucket}/{self.prefix}".rstrip("/")

    def _key(self, key: str) -> str:
        return f"{self.prefix}/{key}" if self.prefix else key

    def _error(self, err: Exception, what: str) -> RepositoryError:
        return RepositoryError(f"{self.location}: {what}: {err}")

    def read(self, key: str) -> bytes:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            return self.client.get_object(Bucket=self.bucket, Key=self._key(key))["Body"].read()
        except ClientError as err:
            if err.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                raise RepositoryError(f"{self.location}/{key} is not there") from None
            raise self._error(err, f"reading {key}") from None
        except BotoCoreError as err:
            raise self._error(err, f"reading {key}") from None

    def write(self, key: str, data: bytes) -> None:
        from botocore.exceptions import BotoCoreError, ClientError

        try:  # a PUT is whole or not at all; the checksum is checked by the server
            self.client.put_object(Bucket=self.bucket, Key=self._key(key), Body=data, ChecksumAlgorithm="SHA256")
        except (BotoCoreError, ClientError) as err:
            raise self._error(err, f"writing {key}") from None

    def exists(self, key: str) -> bool:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            self.client.head_object(Bucket=self.bucket, Key=self._key(key))
            return True
        except ClientError as err:
            if err.response.get("Error", {}).get("Code") in ("NoSuchKey", "404", "NotFound"):
                return False
            raise self._error(err, f"looking for {key}") from None
        except BotoCoreError as err:
            raise self._error(err, f"looking for {key}") from None

    def delete(self, key: str) -> None:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            self.client.delete_object(Bucket=self.bucket, Key=self._key(key))
        except (BotoCoreError, ClientError) as err:
            raise self._error(err, f"deleting {key}") from None

    def keys(self, prefix: str) -> Iterator[str]:
        from botocore.exceptions import BotoCoreError, ClientError

        strip = len(self._key(""))
        try:
            for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket,
                                                                             Prefix=self._key(prefix)):
                for item in page.get("Contents", []):
                    yield item["Key"][strip:]
        except (BotoCoreError, ClientError) as err:
            raise self._error(err, f"listing {prefix}") from None


def open_repository(location: str, settings: Settings) -> Repository:
    """The repository at `location` (a folder, `s3://bucket/prefix`); settings' default when empty."""
    location = location or settings.snapshots.repository or str(settings.data_dir / "snapshots" / "repository")
    if location.startswith(S3):
        bucket, _, prefix = location[len(S3):].partition("/")
        if not bucket:
            raise RepositoryError(f"{location!r}: name a bucket (s3://bucket/prefix)")
        return S3Repository(bucket, prefix, settings)
    return FolderRepository(Path(location).expanduser().absolute())


def split_location(location: str) -> tuple[str, str]:
    """(repository, manifest key) of a snapshot's location; RepositoryError when it is not one."""
    head, sep, tail = location.rpartition(f"/{MANIFESTS}/")
    if not sep or not tail.endswith(".json") or tail.count("/") != 1:
        raise RepositoryError(f"{location!r} is not a snapshot's location (…/{MANIFESTS}/<collection>/<id>.json: "
                              "`hybridsearch snapshot list` shows them)")
    return head, f"{MANIFESTS}/{tail}"


def manifest_key(collection: str, snapshot: str) -> str:
    return f"{MANIFESTS}/{collection}/{snapshot}.json"


def piece_key(sha256: str) -> str:
    return f"{PIECES}/{sha256[:2]}/{sha256}.zst"


def piece_of(key: str) -> str | None:
    name = key.rpartition("/")[2]
    return name[:-4] if key.startswith(f"{PIECES}/") and name.endswith(".zst") else None


# --- files in and out -----------------------------------------------------------------------------------

def upload_file(repo: Repository, path: Path, name: str) -> tuple[StoredFile, int]:
    """The file cut into pieces, each written unless the repository has it; (the file, bytes written)."""
    whole, pieces, written = hashlib.sha256(), [], 0
    compressor = zstandard.ZstdCompressor(level=LEVEL)
    size = 0
    with open(path, "rb") as f:
        while piece := f.read(PIECE_BYTES):
            size += len(piece)
            whole.update(piece)
            digest = hashlib.sha256(piece).hexdigest()
            pieces.append(digest)
            key = piece_key(digest)
            if not repo.exists(key):
                data = compressor.compress(piece)
                repo.write(key, data)
                written += len(data)
    return StoredFile(path=name, size=size, sha256=whole.hexdigest(), pieces=pieces), written


def upload_folder(repo: Repository, folder: Path) -> tuple[list[StoredFile], int]:
    """Every file under `folder` (paths relative to it, sorted); (the files, bytes written)."""
    files, written = [], 0
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        stored, n = upload_file(repo, path, path.relative_to(folder).as_posix())
        files.append(stored)
        written += n
    return files, written


def read_piece(repo: Repository, digest: str, what: str) -> bytes:
    """A piece, decompressed and checked against its sha256; RepositoryError naming `what` otherwise."""
    try:
        data = zstandard.ZstdDecompressor().decompress(repo.read(piece_key(digest)))
    except zstandard.ZstdError as err:
        raise RepositoryError(f"a piece of {what} ({digest[:12]}…) is corrupted: {err}") from None
    if hashlib.sha256(data).hexdigest() != digest:
        raise RepositoryError(f"a piece of {what} ({digest[:12]}…) is corrupted: its sha256 does not match")
    return data


def file_matches(path: Path, stored: StoredFile) -> bool:
    if not path.is_file() or path.stat().st_size != stored.size:
        return False
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(PIECE_BYTES):
            digest.update(block)
    return digest.hexdigest() == stored.sha256


def download_files(repo: Repository, files: list[StoredFile], folder: Path, what: str) -> int:
    """The files written under `folder`, each checked whole; one already there and whole is kept (a rerun goes
    on where a killed one stopped). Bytes written. RepositoryError at the first piece missing or corrupted."""
    written = 0
    for stored in files:
        path = folder / stored.path
        if not path.resolve().is_relative_to(folder.resolve()):
            raise RepositoryError(f"{what}: file {stored.path!r} would land outside the collection's folder")
        if file_matches(path, stored):
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        digest = hashlib.sha256()
        with tempfile.NamedTemporaryFile(dir=path.parent, prefix=".tmp-", delete=False) as f:
            try:
                for piece in stored.pieces:
                    data = read_piece(repo, piece, f"{what}: {stored.path}")
                    digest.update(data)
                    f.write(data)
                f.flush()
                os.fsync(f.fileno())
            except BaseException:
                os.unlink(f.name)
                raise
        if digest.hexdigest() != stored.sha256:
            os.unlink(f.name)
            raise RepositoryError(f"{what}: {stored.path} is not the file the snapshot took (sha256 differs)")
        os.replace(f.name, path)
        written += stored.size
    return written
