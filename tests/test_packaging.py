"""The service install has no `tools` extra (docker/Dockerfile: `pip install .`): no module of the serving
path imports, at module level, a package that only the `tools` extra of pyproject.toml brings, and the CLI
starts without those packages (its developer tools say how to install them)."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from hybridsearch.runtime import services

REPO = Path(__file__).resolve().parents[1]
SERVICES = REPO / "services"
PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]

# Distribution -> the top-level modules it installs. A package added to the `tools` extra needs its row.
IMPORT_NAMES = {
    "ranx": {"ranx"},
    "hdrhistogram": {"hdrh"},
    "matplotlib": {"matplotlib", "mpl_toolkits"},
    "threadpoolctl": {"threadpoolctl"},
    "grafana-foundation-sdk": {"grafana_foundation_sdk"},
    "model2vec": {"model2vec"},
}
# The serving path: the services, what they share, the clients, the stack's launcher and supervisor, doctor,
# and the CLI itself (`hybridsearch serve` imports every command module).
SERVING = [*services.NAMES, "reranker", "security", "storage", "text", "contract", "runtime", "query", "config", "reconcile",
           "client",
           "observability", "cli", "launcher.py", "supervision.py", "doctor.py", "corpus.py", "__init__.py"]
# Tooling that lives beside serving code: it may import the tools packages, as long as no serving module
# imports it at module level (the CLI's `dashboards` command imports it inside the command).
TOOLING = {"observability/dashboards.py": "hybridsearch.observability.dashboards"}


def names(requirements: list[str]) -> set[str]:
    return {canonicalize_name(Requirement(r).name) for r in requirements}


def tools_only() -> set[str]:
    return names(PROJECT["optional-dependencies"]["tools"]) - names(PROJECT["dependencies"])


def tools_modules() -> set[str]:
    return {module for dist in tools_only() for module in IMPORT_NAMES.get(dist, ())}


def serving_files() -> list[Path]:
    files = []
    for part in SERVING:
        path = SERVICES / part
        files += [path] if path.suffix == ".py" else sorted(path.rglob("*.py"))
    return files


def is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
           (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def module_level_imports(source: str) -> set[str]:
    """What importing the module imports: every import statement outside function bodies (class bodies,
    if/try/with blocks included) and outside `if TYPE_CHECKING:`. `from a import b` counts as a and a.b."""
    found: set[str] = set()

    def visit(statements) -> None:
        for node in statements:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module)
                found.update(f"{node.module}.{alias.name}" for alias in node.names)
            if isinstance(node, ast.If) and is_type_checking(node.test):
                visit(node.orelse)
                continue
            for field in ("body", "orelse", "finalbody", "handlers", "cases"):
                visit(getattr(node, field, None) or [])

    visit(ast.parse(source).body)
    return found


def test_the_tools_extra_is_mapped_and_not_in_the_core():
    tools = tools_only()
    assert {"ranx", "hdrhistogram", "matplotlib", "threadpoolctl"} <= tools
    assert tools == names(PROJECT["optional-dependencies"]["tools"]), "a tools package is a core one too"
    assert tools == set(IMPORT_NAMES), "every package of the tools extra needs its import names here"


def test_the_cli_guard_names_every_tools_package():
    from hybridsearch.cli.base import TOOLS_EXTRA

    assert set(TOOLS_EXTRA.values()) == tools_only()
    assert all(module in IMPORT_NAMES[dist] for module, dist in TOOLS_EXTRA.items())


def test_the_serving_modules_are_found():
    files = serving_files()
    assert len(files) > 80
    assert SERVICES / "cli" / "serve.py" in files and SERVICES / "doctor.py" in files


@pytest.mark.parametrize("path", serving_files(), ids=lambda p: str(p.relative_to(SERVICES)))
def test_no_serving_module_imports_a_tools_package(path):
    imported = module_level_imports(path.read_text())
    if str(path.relative_to(SERVICES)) in TOOLING:
        return
    assert not {m for m in imported if m.partition(".")[0] in tools_modules()}, \
        "a tools-extra package at module level: import it inside the function, or make it a core dependency"
    assert not imported & set(TOOLING.values()), "tooling beside the serving code, imported at module level"


def test_the_check_can_fail():
    """Tooling does import the tools packages at module level, and the walk tells lazy from eager imports."""
    assert "ranx" in module_level_imports((SERVICES / "tools" / "bench.py").read_text())
    recorder = SERVICES / "tools" / "perf" / "load" / "recorder.py"
    assert "hdrh.histogram" in module_level_imports(recorder.read_text())
    source = ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import ranx\n"
              "try:\n    import matplotlib\nexcept ImportError:\n    pass\n"
              "class A:\n    from hdrh import histogram\n"
              "def f():\n    import threadpoolctl\n")
    assert module_level_imports(source) & tools_modules() == {"matplotlib", "hdrh"}


# Runs in a fresh interpreter where every tools-extra module is absent, as in the service image.
WITHOUT_TOOLS = """
import json, sys, tempfile
from pathlib import Path
for name in json.loads(sys.argv[1]):
    sys.modules[name] = None  # `import name` now fails as it does when the package is not installed
import importlib
for module in ("hybridsearch.doctor", "hybridsearch.launcher", "hybridsearch.supervision",
               "hybridsearch.gateway.service", "hybridsearch.bm25.service", "hybridsearch.vector.service",
               "hybridsearch.expansion.service", "hybridsearch.fusion.service"):
    importlib.import_module(module)
from typer.testing import CliRunner
from hybridsearch.cli import app
tmp = Path(tempfile.mkdtemp())
(tmp / "bench.json").write_text("{}")
runs = {}
for args in (["--help"], ["serve", "--help"], ["doctor", "--help"], ["query", "--help"], ["index", "--help"],
             ["loadtest", "--help"], ["bench-report", str(tmp / "bench.json")],
             ["dashboards", "--out", str(tmp)], ["loadtest", "--address", "127.0.0.1:1"]):
    result = CliRunner().invoke(app, args)
    name = " ".join(args[:1] if len(args) > 1 and args[1] != "--help" else args)
    runs[name] = [result.exit_code, result.output]
print(json.dumps(runs))
"""


def test_the_cli_starts_without_the_tools_extra():
    proc = subprocess.run([sys.executable, "-c", WITHOUT_TOOLS, json.dumps(sorted(tools_modules()))],
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr
    runs = {cmd: (code, " ".join(out.split())) for cmd, (code, out) in json.loads(proc.stdout).items()}
    for cmd in ("--help", "serve --help", "doctor --help", "query --help", "index --help", "loadtest --help"):
        assert runs[cmd][0] == 0, runs[cmd]
    assert "Developer tools" in runs["--help"][1] and "Serve" in runs["--help"][1]
    for cmd, packages in (("bench-report", {"ranx"}), ("dashboards", {"grafana-foundation-sdk"}),
                          ("loadtest", {"matplotlib", "hdrhistogram"})):
        code, out = runs[cmd]
        assert code == 2, (cmd, out)
        assert any(f"hybridsearch {cmd} needs {p}" in out for p in packages), out
        assert "pip install 'hybridsearch[tools]'" in out, out
        assert "Traceback" not in out
