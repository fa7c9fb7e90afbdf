"""The snapshot repository (snapshots/repository.py) in a folder and in a real S3-API server (moto_server):
files cut into content-addressed pieces, written once, read back checked; a corrupted piece or manifest is
refused, never restored."""

from __future__ import annotations

import os
from datetime import datetime, timezone

import pytest

from hybridsearch.config.settings import Settings
from hybridsearch.runtime.services import Store
from hybridsearch.snapshots.manifest import Manifest, ManifestError, StorePart, parse
from hybridsearch.snapshots.repository import (
    PIECE_BYTES,
    RepositoryError,
    download_files,
    open_repository,
    piece_key,
    split_location,
    upload_folder,
)


@pytest.fixture(params=["folder", "s3"])
def repo(request, tmp_path):
    if request.param == "folder":
        return open_repository(str(tmp_path / "repo"), Settings(data_dir=tmp_path))
    endpoint = request.getfixturevalue("s3_endpoint")
    settings = Settings(data_dir=tmp_path, snapshots={"s3_endpoint_url": endpoint})
    return open_repository(f"s3://snapshots/{request.node.name.replace('[', '-').rstrip(']')}", settings)


def folder_of(root, files: dict[str, bytes]):
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    return root


def test_files_round_trip_and_a_second_upload_writes_only_new_pieces(repo, tmp_path):
    big = os.urandom(PIECE_BYTES) + bytes(PIECE_BYTES // 2)  # two pieces, the second all zeros
    source = folder_of(tmp_path / "a", {"seg/one.idx": big, "meta.json": b'{"v": 1}', "empty": b""})
    files, written = upload_folder(repo, source)
    assert [f.path for f in files] == ["empty", "meta.json", "seg/one.idx"]
    assert len(files[2].pieces) == 2 and written > PIECE_BYTES  # the random piece does not compress
    again, written_again = upload_folder(repo, source)
    assert again == files and written_again == 0  # every piece already held
    (source / "meta.json").write_bytes(b'{"v": 2}')
    _, changed = upload_folder(repo, source)
    assert 0 < changed < 100  # only the changed small file's piece
    out = tmp_path / "restored"
    assert download_files(repo, files, out, "test") == len(big) + 8
    assert (out / "seg/one.idx").read_bytes() == big and (out / "empty").read_bytes() == b""
    assert download_files(repo, files, out, "test") == 0  # a rerun keeps what is there and whole


def test_a_corrupted_or_missing_piece_is_refused(repo, tmp_path):
    source = folder_of(tmp_path / "a", {"data.bin": os.urandom(1000)})
    files, _ = upload_folder(repo, source)
    key = piece_key(files[0].pieces[0])
    import zstandard
    repo.write(key, zstandard.ZstdCompressor().compress(os.urandom(1000)))  # well-formed, other bytes
    with pytest.raises(RepositoryError, match="is corrupted: its sha256 does not match"):
        download_files(repo, files, tmp_path / "out", "bm25 notes")
    repo.write(key, b"not zstd at all")
    with pytest.raises(RepositoryError, match="is corrupted"):
        download_files(repo, files, tmp_path / "out", "bm25 notes")
    repo.delete(key)
    with pytest.raises(RepositoryError, match="is not there"):
        download_files(repo, files, tmp_path / "out", "bm25 notes")
    assert not (tmp_path / "out" / "data.bin").exists()  # nothing half-written is left in place


def manifest() -> Manifest:
    part = StorePart(store=Store.BM25, engine="embedded-tantivy", documents=3, chunks=4, files=[])
    return Manifest(id="notes-1", collection="notes", created_at=datetime.now(timezone.utc), write_pause_ms=1.5,
                    collection_config={"language": "en"}, embedder="minilm-fp32", embedder_fingerprint="x",
                    parts=[part, part.model_copy(update={"store": Store.VECTOR})])


def test_a_manifest_changed_or_cut_short_is_refused():
    text = manifest().sealed()
    assert parse(text, "here").part(Store.VECTOR).documents == 3
    with pytest.raises(ManifestError, match="does not match its checksum"):
        parse(text.replace('"documents": 3', '"documents": 4', 1), "here")
    with pytest.raises(ManifestError, match="is not a snapshot manifest"):
        parse(text[: len(text) // 2], "here")


def test_a_manifest_written_before_sealed_as_still_matches_its_checksum_and_one_with_it_is_covered():
    import hashlib
    import json

    body = manifest().model_dump(mode="json")
    del body["sealed_as"]  # as a build before the field wrote it
    body["checksum"] = hashlib.sha256(json.dumps({**body, "checksum": ""}, sort_keys=True,
                                                 separators=(",", ":")).encode()).hexdigest()
    assert parse(json.dumps(body), "old").sealed_as == ""
    sealed = manifest().model_copy(update={"sealed_key_ids": ["ab12cd34"], "sealed_as": "notes"}).sealed()
    assert parse(sealed, "new").sealed_as == "notes"
    with pytest.raises(ManifestError, match="does not match its checksum"):
        parse(sealed.replace('"sealed_as": "notes"', '"sealed_as": "other"'), "new")


def test_locations_name_their_repository():
    assert split_location("s3://b/p/snapshots/notes/notes-1.json") == ("s3://b/p", "snapshots/notes/notes-1.json")
    assert split_location("/backups/snapshots/notes/n.json") == ("/backups", "snapshots/notes/n.json")
    for bad in ("/backups/notes.json", "s3://b/snapshots/notes/x.txt", "/x/snapshots/a/b/c.json"):
        with pytest.raises(RepositoryError, match="is not a snapshot's location"):
            split_location(bad)
