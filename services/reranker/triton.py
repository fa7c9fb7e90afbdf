"""Runs a real Triton Inference Server (the `tritonserver` binary of nvidia-pytriton) on CPU.

The runtime model repository is assembled under data_dir/triton from the tracked template
(model_repository/) and the exported model files (data_dir/models/reranker). The launcher sets what
this build of Triton needs: the interpreter's LIBDIR on LD_LIBRARY_PATH, the venv's bin first on
PATH, and a backends/python folder holding the python backend plus the stub for this Python.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import sysconfig
from pathlib import Path

from hybridsearch.config.settings import Settings
from hybridsearch.runtime.models import ModelUnavailable, models_dir, verify

TEMPLATE = Path(__file__).parent / "model_repository"


def pytriton_dir() -> Path:
    import importlib.util

    spec = importlib.util.find_spec("pytriton")
    if spec is None or not spec.submodule_search_locations:
        raise ModelUnavailable("nvidia-pytriton is not installed: no tritonserver binary")
    return Path(next(iter(spec.submodule_search_locations))) / "tritonserver"


def reranker_export_dir(settings: Settings) -> Path:
    return models_dir(settings) / "reranker"


def read_export(folder: Path) -> dict:
    """The manifest of an exported reranker folder, its model.onnx checked against the manifest's sha256."""
    path = folder / "manifest.json"
    if not path.exists():
        raise ModelUnavailable(f"no reranker exported at {folder}: run `hybridsearch export-models`")
    manifest = json.loads(path.read_text())
    verify(folder / "model.onnx", manifest["sha256"])
    return manifest


def build_repository(settings: Settings) -> Path:
    """data_dir/triton/repository/reranker/{config.pbtxt, 1/{model.py, model.onnx, tokenizer.json, manifest.json}}."""
    source = reranker_export_dir(settings)
    manifest = read_export(source)
    repo = settings.data_dir / "triton" / "repository"
    target = repo / settings.rerank.model_name
    shutil.rmtree(target, ignore_errors=True)
    (target / "1").mkdir(parents=True)
    config = (TEMPLATE / "reranker" / "config.pbtxt").read_text().replace(
        'name: "reranker"', f'name: "{settings.rerank.model_name}"'
    )
    params = {"trained": str(bool(manifest.get("trained"))).lower(), "model_name": manifest.get("name", "reranker")}
    config += "parameters [\n" + ",\n".join(
        f'  {{ key: "{k}", value: {{ string_value: "{v}" }} }}' for k, v in params.items()
    ) + "\n]\n"
    (target / "config.pbtxt").write_text(config)
    shutil.copy(TEMPLATE / "reranker" / "1" / "model.py", target / "1" / "model.py")
    for name in ("model.onnx", "tokenizer.json", "manifest.json"):
        os.link(source / name, target / "1" / name) if _same_fs(source, target) else shutil.copy(source / name, target / "1" / name)
    return repo


def _same_fs(a: Path, b: Path) -> bool:
    return a.stat().st_dev == b.stat().st_dev


def build_backends(settings: Settings) -> Path:
    """backends/python with the python backend and the stub matching this interpreter."""
    src = pytriton_dir()
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    stub = src / "python_backend_stubs" / version / "triton_python_backend_stub"
    if not stub.exists():
        raise ModelUnavailable(f"this nvidia-pytriton has no python backend stub for Python {version}")
    backends = settings.data_dir / "triton" / "backends"
    python_dir = backends / "python"
    python_dir.mkdir(parents=True, exist_ok=True)
    for f in (src / "backends" / "python" / "libtriton_python.so", src / "backends" / "python" / "triton_python_backend_utils.py", stub):
        dest = python_dir / f.name
        if not dest.exists():
            shutil.copy(f, dest)
    return backends


def triton_command(settings: Settings) -> tuple[list[str], dict[str, str]]:
    repo = build_repository(settings)
    backends = build_backends(settings)
    grpc_port = int(settings.rerank.triton_url.rsplit(":", 1)[1])
    cmd = [
        str(pytriton_dir() / "bin" / "tritonserver"),
        f"--model-repository={repo.resolve()}",
        f"--backend-directory={backends.resolve()}",
        f"--grpc-address={settings.endpoints.host}",
        f"--grpc-port={grpc_port}",
        f"--http-address={settings.endpoints.host}",
        f"--http-port={settings.rerank.triton_http_port}",
        f"--metrics-address={settings.endpoints.host}",
        f"--metrics-port={settings.rerank.triton_metrics_port}",
        "--exit-on-error=true",
        "--log-verbose=0",
    ]
    env = dict(os.environ)
    libdir = sysconfig.get_config_var("LIBDIR") or ""
    extra_libs = [libdir, str(pytriton_dir().parent.parent / "nvidia_pytriton.libs")]
    env["LD_LIBRARY_PATH"] = ":".join([*extra_libs, env.get("LD_LIBRARY_PATH", "")]).strip(":")
    env["PATH"] = f"{Path(sys.executable).parent}:{env.get('PATH', '')}"
    env["PYTHONPATH"] = ":".join(p for p in sys.path if p and "site-packages" in p)
    return cmd, env
