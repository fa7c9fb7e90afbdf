"""The serving path stays apart from tooling: no module of a service (or what they share) imports
hybridsearch.tools (benchmarks, load generator, quality work, fault injection, training)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from hybridsearch.runtime import services

SERVICES = Path(__file__).resolve().parents[2] / "services"
# What a running service imports: the five services, the gateway's clients, what they share, reconcile.
SERVING = [*services.NAMES, "security", "storage", "text", "contract", "runtime", "query", "config", "reconcile", "client",
           "reranker/blend.py", "reranker/client.py", "reranker/triton.py"]


def modules() -> list[Path]:
    out = []
    for part in SERVING:
        path = SERVICES / part
        out += [path] if path.suffix == ".py" else sorted(path.rglob("*.py"))
    return out


def imported(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_the_serving_modules_are_found():
    assert len(modules()) > 40


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(SERVICES)))
def test_no_serving_module_imports_tooling(path):
    assert not {n for n in imported(path) if n == "hybridsearch.tools" or n.startswith("hybridsearch.tools.")}


def test_tooling_does_import_what_it_measures():
    """The check can fail: tooling itself imports the serving code it drives."""
    assert any(n.startswith("hybridsearch.client") for n in imported(SERVICES / "tools" / "bench.py"))
