"""The `hybridsearch` command line: one Typer app (`hybridsearch.cli:app`), its commands in one module per
group, shown in the top-level help under panels: Serve, Search and index, Operate, Developer tools.

The developer tools (quality.py, perf.py) import their heavy modules inside each command, so the service
install (no `tools` extra) still starts `serve`, `doctor`, `query`; a tool whose package is missing says
`pip install 'hybridsearch[tools]'` and exits 2 (base.tool_imports)."""

from hybridsearch.cli.base import SAMPLE_CORPUS, SAMPLE_QUERY, app, console

# Registration order is the help's order: each module adds its commands to `app` on import.
from hybridsearch.cli import serve, search, resources, ops, snapshots, aliases, sealing, quality, perf, hops, readers  # noqa: E402,F401  isort: skip
from hybridsearch.cli.shell import prompt  # noqa: E402,F401  isort: skip  (`shell`, after the resources)
from hybridsearch.cli.quality import write_between_markers
from hybridsearch.cli.search import highlighted, parse_filters, print_response
from hybridsearch.cli.serve import SERVICE_MAINS

__all__ = ["SAMPLE_CORPUS", "SAMPLE_QUERY", "SERVICE_MAINS", "app", "console", "highlighted", "parse_filters",
           "print_response", "write_between_markers"]
