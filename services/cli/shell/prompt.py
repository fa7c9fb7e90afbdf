"""The terminal side of `hybridsearch shell`: a prompt_toolkit prompt (history kept in the data dir, the
commands completed with Tab) that hands each line to a Session and prints what comes back with rich.
Lines piped in (stdin not a terminal) run one after another without a prompt."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console

from hybridsearch.cli.base import SEARCH, app, console, gateway_client
from hybridsearch.cli.shell.commands import ShellError, completions
from hybridsearch.cli.shell.session import Session
from hybridsearch.cli.shell.state import State
from hybridsearch.config.settings import get_settings

HISTORY = Path("shell") / "history"  # under the data dir


def history_path(data_dir: Path) -> Path:
    path = data_dir / HISTORY
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def interactive(session: Session, out: Console, history: Path) -> None:
    from prompt_toolkit import PromptSession
    from prompt_toolkit.completion import WordCompleter
    from prompt_toolkit.history import FileHistory

    prompt = PromptSession(history=FileHistory(str(history)),
                           completer=WordCompleter(completions(), sentence=True), complete_while_typing=False)
    out.print(f"{session.state.settings_line()}\ntype a query, or :help")
    while not session.done:
        try:
            line = prompt.prompt(session.prompt())
        except KeyboardInterrupt:  # Ctrl-C drops the line being typed
            continue
        except EOFError:  # Ctrl-D
            break
        for renderable in session.handle(line):
            out.print(renderable)


def piped(session: Session, out: Console) -> None:
    for line in sys.stdin:
        for renderable in session.handle(line):
            out.print(renderable)
        if session.done:
            break


@app.command(rich_help_panel=SEARCH)
def shell(
    collection: Annotated[Optional[list[str]], typer.Option("--collection", "-c", help="repeat to search several collections")] = None,
    mode: Annotated[str, typer.Option(help="bm25 | vector | hybrid")] = "hybrid",
    effort: Annotated[str, typer.Option(help="fast | balanced | thorough")] = "balanced",
    n: Annotated[int, typer.Option("-n", help="hits a page")] = 10,
    filter_: Annotated[Optional[list[str]], typer.Option("--filter", help="field=value or field!=value; repeat")] = None,
):
    """An interactive query shell: a results table, :next, :explain, :mode, :effort, :filter, :open N, :collections."""
    try:
        state = State(collections=tuple(collection or ["default"]), top_k=n).with_mode(mode).with_effort(effort)
        if filter_:
            state = state.with_filters(tuple(filter_))
    except ShellError as err:
        raise typer.BadParameter(str(err)) from None
    out = Console(highlight=False)
    with gateway_client() as client:
        session = Session(client, state)
        if sys.stdin.isatty():
            interactive(session, out, history_path(get_settings().data_dir))
        else:
            piped(session, out)
    console.print("bye")
