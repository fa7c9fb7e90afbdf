"""The shell's line parser: queries, commands with their argument counts, clear refusals."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hybridsearch.cli.shell.commands import (SPECS, Command, Invocation, Query, ShellError, completions, hit_number,
                                             parse)


def test_a_line_without_the_prefix_is_a_query():
    assert parse("  reciprocal rank fusion ") == Query("reciprocal rank fusion")
    assert parse("what does :next do?") == Query("what does :next do?")
    assert parse("   ") is None


def test_commands_and_their_arguments():
    assert parse(":next") == Invocation(Command.NEXT)
    assert parse(":effort fast") == Invocation(Command.EFFORT, ("fast",))
    assert parse(":MODE bm25") == Invocation(Command.MODE, ("bm25",))
    assert parse(":filter lang=en team!=b") == Invocation(Command.FILTER, ("lang=en", "team!=b"))
    assert parse(":open 11") == Invocation(Command.OPEN, ("11",))
    assert parse(":use notes code") == Invocation(Command.USE, ("notes", "code"))
    assert parse(":q") == Invocation(Command.QUIT) and parse(":exit") == Invocation(Command.QUIT)


@pytest.mark.parametrize(("line", "message"), [
    (":nxt", "unknown command :nxt; :help lists them"),
    (":", "a command follows ':'"),
    (":open", "usage: :open N"),
    (":open 1 2", "usage: :open N"),
    (":next 2", "usage: :next"),
    (":effort fast slow", r"usage: :effort \[fast\|balanced\|thorough\]"),
    (":use", "usage: :use COLLECTION"),
])
def test_mistakes_are_one_clear_line(line, message):
    with pytest.raises(ShellError, match=message):
        parse(line)


def test_hit_numbers_are_the_tables():
    assert hit_number("11") == 11
    for bad in ("0", "-1", "x", "1.5"):
        with pytest.raises(ShellError, match="hit's number"):
            hit_number(bad)


def test_every_command_has_help_and_completes():
    assert set(SPECS) == set(Command)
    assert completions() == [f":{c.value}" for c in Command]


@given(st.text(max_size=40))
def test_any_line_parses_or_is_refused_clearly(line):
    try:
        parsed = parse(line)
    except ShellError as err:
        assert str(err)
    else:
        assert parsed is None or isinstance(parsed, Query | Invocation)
