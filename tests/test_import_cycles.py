"""No import cycle among the modules of services/ (issue 34: launcher and supervision imported each other, one of
them inside a function). Imports inside functions count too: a cycle that only a late import lets load is still
two modules that cannot be read apart."""

from __future__ import annotations

import ast
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

SERVICES = Path(__file__).resolve().parent.parent / "services"


def module_name(path: Path) -> str:
    parts = ["hybridsearch", *path.relative_to(SERVICES).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(tree: ast.Module, known: set[str]) -> set[str]:
    """The hybridsearch modules a module imports anywhere (an imported name that is a module counts as it)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {alias.name for alias in node.names if alias.name in known}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                out.add(full if full in known else node.module)
    return {name for name in out if name in known}


def test_no_module_imports_itself_back_through_others():
    paths = [p for p in SERVICES.rglob("*.py") if "v1" not in p.relative_to(SERVICES).parts]
    known = {module_name(p) for p in paths}
    graph = {module_name(p): imported(ast.parse(p.read_text()), known) - {module_name(p)} for p in paths}
    try:
        tuple(TopologicalSorter(graph).static_order())
    except CycleError as err:
        raise AssertionError(f"an import cycle: {' -> '.join(err.args[1])}") from None
