"""What every command module shares: the app, the console, the help panels, the gateway client, and the
guard that turns a missing `tools` extra into one clear line instead of a traceback."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from hybridsearch.config.settings import get_settings

app = typer.Typer(help="hybridsearch: hybrid search microservices (BM25 + vector + expansion, fusion, Triton reranker)",
                  epilog="Developer tools need the tools extra: pip install 'hybridsearch\\[tools]'",
                  no_args_is_help=True, pretty_exceptions_enable=False)
console = Console(stderr=True)

# The top-level help groups the commands: serving and operations first, the developer tools last.
SERVE = "Serve"
SEARCH = "Search and index"
OPERATE = "Operate"
TOOLS = "Developer tools"

SAMPLE_CORPUS = Path(__file__).resolve().parents[2] / "samples" / "corpus"
SAMPLE_QUERY = "how are variant queries weighted when results are fused?"

# Import name -> distribution of every package only the `tools` extra brings (pyproject.toml);
# tests/test_packaging.py keeps this table and the extra in step.
TOOLS_EXTRA = {
    "ranx": "ranx",
    "hdrh": "hdrhistogram",
    "matplotlib": "matplotlib",
    "threadpoolctl": "threadpoolctl",
    "grafana_foundation_sdk": "grafana-foundation-sdk",
    "model2vec": "model2vec",
}
INSTALL_TOOLS = "pip install 'hybridsearch[tools]'"


@contextmanager
def tool_imports(command: str) -> Iterator[None]:
    """Around a developer tool's imports: a package of the `tools` extra that is not installed (the service
    image leaves them out) ends the command with exit code 2 and the install line."""
    try:
        yield
    except ModuleNotFoundError as err:
        top = (err.name or "").partition(".")[0]
        if top not in TOOLS_EXTRA:
            raise
        console.print(f"[red]hybridsearch {command} needs {TOOLS_EXTRA[top]}[/], which only the tools extra "
                      f"installs:\n  {escape(INSTALL_TOOLS)}", soft_wrap=True)
        raise typer.Exit(2) from None


def gateway_client():
    from hybridsearch.client import GatewayClient

    return GatewayClient(get_settings().endpoints.addr("gateway"))


def progress_bar() -> Progress:
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=console)


def read_corpus(path: Path):
    from hybridsearch.corpus import read_documents

    return read_documents(path)


def wait_forever() -> None:
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        console.print("stopping…")


def split_csv(value: str) -> list[str]:
    return [part.strip() for part in value.split(",") if part.strip()]
