"""What a line typed into the shell means: a query, or a `:command` with its arguments, checked here so that
a mistake is one clear line (ShellError) before anything is sent."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from hybridsearch.client import EFFORTS, MODES


class ShellError(ValueError):
    """A line the shell cannot act on: the message says why and what would work."""


class Command(Enum):
    NEXT = "next"
    EXPLAIN = "explain"
    MODE = "mode"
    EFFORT = "effort"
    CONTEXT = "context"
    FILTER = "filter"
    USE = "use"
    OPEN = "open"
    COLLECTIONS = "collections"
    HELP = "help"
    QUIT = "quit"


@dataclass(frozen=True)
class Spec:
    usage: str            # the arguments, as help shows them
    help: str
    min_args: int = 0
    max_args: int | None = 0  # None: any number


SPECS: dict[Command, Spec] = {
    Command.NEXT: Spec("", "the next page of the last query (numbered on)"),
    Command.EXPLAIN: Spec("", "why the last query's hits rank as they do: legs, expansion, fusion, timings"),
    Command.MODE: Spec(f"[{'|'.join(MODES)}]", "show or set the retrieval mode", max_args=1),
    Command.EFFORT: Spec(f"[{'|'.join(EFFORTS)}]", "show or set the effort", max_args=1),
    Command.CONTEXT: Spec("[0-5]", "show or set how many neighbouring chunks each hit shows before and after it",
                          max_args=1),
    Command.FILTER: Spec("[field=value | field!=value ... | clear]",
                         "show, add (repeat a field for any of its values) or clear metadata filters", max_args=None),
    Command.USE: Spec("COLLECTION ...", "search these collections from now on", min_args=1, max_args=None),
    Command.OPEN: Spec("N", "the whole document of hit N (its number in the table)", min_args=1, max_args=1),
    Command.COLLECTIONS: Spec("", "the collections this key may read"),
    Command.HELP: Spec("", "this list"),
    Command.QUIT: Spec("", "leave the shell (Ctrl-D too)"),
}
ALIASES = {"q": Command.QUIT, "exit": Command.QUIT, "n": Command.NEXT, "?": Command.HELP, "h": Command.HELP}
PREFIX = ":"


@dataclass(frozen=True)
class Query:
    text: str


@dataclass(frozen=True)
class Invocation:
    command: Command
    args: tuple[str, ...] = ()


def command_of(name: str) -> Command:
    try:
        return ALIASES.get(name) or Command(name)
    except ValueError:
        raise ShellError(f"unknown command :{name}; :help lists them") from None


def parse(line: str) -> Query | Invocation | None:
    """A typed line: None when blank, an Invocation for `:command args`, else a Query. Arguments are split
    at whitespace; their count is checked against the command's Spec."""
    text = line.strip()
    if not text:
        return None
    if not text.startswith(PREFIX):
        return Query(text)
    words = text[len(PREFIX):].split()
    if not words:
        raise ShellError("a command follows ':' (:help lists them)")
    name, *args = words
    command = command_of(name.lower())
    spec = SPECS[command]
    if len(args) < spec.min_args or (spec.max_args is not None and len(args) > spec.max_args):
        shown = f" {spec.usage}" if spec.usage else ""
        raise ShellError(f"usage: :{command.value}{shown}")
    return Invocation(command, tuple(args))


def hit_number(arg: str) -> int:
    """`:open N`'s N: a hit's number as the table shows it (1-based, numbered on across pages)."""
    if not arg.isdigit() or int(arg) < 1:
        raise ShellError(f":open takes a hit's number from the table (1, 2, ...), not {arg!r}")
    return int(arg)


def completions() -> list[str]:
    """Every command as typed, for the prompt's completion."""
    return [f"{PREFIX}{command.value}" for command in Command]
