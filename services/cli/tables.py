"""Tables that fit the terminal: at any width they wrap, never cut, and never break a name.

Rich shortens a table wider than the console by cutting cells to an ellipsis (`reconcile` at 80 columns
showed `colle…`). Here a header breaks at its spaces (a column needs only its longest word), columns sit
one space apart, and a cell too wide for its column folds onto the next line: every character stays. A
column of names (`Column(..., whole=True)`: collections, ids, locations) keeps each cell on one line, so a
name is read and copied whole (`team-notes-20269`, never `team-notes-20` / `269`); the other columns give
way to it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from rich import box
from rich.table import Table

Justify = Literal["left", "right", "center"]


@dataclass(frozen=True)
class Column:
    header: str
    justify: Justify = "right"
    ratio: int | None = None  # a share of the width left over (a text column that should take the room)
    whole: bool = False  # names: a cell never breaks across lines


def wrapping_table(title: str | None, columns: Sequence[Column | str]) -> Table:
    """An empty table of these columns (a bare string: a right-justified column of that header)."""
    table = Table(title=title, box=box.SIMPLE_HEAD, padding=(0, 0), pad_edge=False, title_justify="left")
    for column in columns:
        column = Column(column) if isinstance(column, str) else column
        table.add_column(column.header.replace(" ", "\n"), justify=column.justify, overflow="fold", ratio=column.ratio,
                         no_wrap=column.whole)
    return table


def name_column(header: str) -> Column:
    """A left-justified column of names, each kept on one line."""
    return Column(header, "left", whole=True)
