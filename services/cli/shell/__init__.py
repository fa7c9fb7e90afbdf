"""`hybridsearch shell`: an interactive query shell over the gateway, one module per concern.

    commands.py  what a typed line means (a query, or `:command args`), parsed and checked: pure
    state.py     what the session holds (collections, mode, effort, filters, the last page) and how each
                 command changes it; the SearchRequest it sends: pure
    catalog.py   the client's resource calls the shell needs (documents by id, the collections), with
                 "not available on this server" when the gateway does not serve them
    render.py    rich renderables: the results table, the explanation, a document, the collections, help
    session.py   one line in, renderables out: parse, change state, call the gateway, render
    prompt.py    the prompt_toolkit loop (history in the data dir, completion) and the typer command

Only prompt.py touches the terminal; the rest is tested without one (tests/cli/shell/), and the whole
through tmux against a real stack (tests/cli/shell/test_prompt.py)."""
