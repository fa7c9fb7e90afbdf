"""`hybridsearch query`: GNO's flags, each shown working through the real stack; filter parsing and
highlight markup as units; the commands' names and help panels, and the tools-extra guard."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys

import pytest
import typer
from stacks import client_environment

from hybridsearch.cli import SAMPLE_CORPUS, app, highlighted, parse_filters
from hybridsearch.cli.base import tool_imports
from hybridsearch.cli.search import PAGE_OPTIONS, next_page_command
from hybridsearch.client import Not, document
from hybridsearch.corpus import read_folder
from hybridsearch.v1 import search_pb2

COLLECTION = "cli-docs"


def test_parse_filters():
    assert parse_filters(["lang=en", "team=a", "team=b", "status!=draft"]) == {
        "status": Not("draft"), "lang": "en", "team": ["a", "b"]}
    assert parse_filters(["expr=a=b"]) == {"expr": "a=b"}
    with pytest.raises(typer.BadParameter, match="expected field=value"):
        parse_filters(["lang"])


def query_context(args: list[str]) -> typer.Context:
    group = typer.main.get_command(app)
    return group.commands["query"].make_context("query", list(args), parent=group.make_context("hybridsearch", ["query"]))


def test_next_page_command_repeats_every_option_as_given():
    args = ["rank fusion", "-c", "a", "-c", "b", "--effort", "fast", "-n", "3", "--no-expand", "--filter", "x=[y]",
            "--min-score", "0.5", "--explain", "--offset", "2", "--page-token", "OLD"]
    line = next_page_command(query_context(args), "NEW")
    assert line == ("hybridsearch query 'rank fusion' --collection a --collection b --effort fast -n 3 --no-expand "
                    "--min-score 0.5 --filter 'x=[y]' --explain --page-token NEW")
    again = query_context(shlex.split(line)[2:]).params  # it parses back to the same query
    before = query_context(args).params
    assert {k: v for k, v in again.items() if k not in PAGE_OPTIONS} == {k: v for k, v in before.items() if k not in PAGE_OPTIONS}
    assert again["page_token"] == "NEW" and again["offset"] == 0
    assert next_page_command(query_context(args), "") == ""


def test_highlighted_markup_escapes_text():
    snippet = "rank [fusion] ranks"
    spans = [search_pb2.Highlight(start=0, end=4), search_pb2.Highlight(start=14, end=19)]
    assert highlighted(snippet, spans) == "[bold yellow]rank[/] \\[fusion] [bold yellow]ranks[/]"


# Every command by its help panel; names are what the Makefile, docs, tests and scripts call.
PANELS = {
    "Serve": ["serve", "run-demo", "export-models", "install-llm", "triton-repository"],
    "Search and index": ["index", "query", "stats", "collections", "docs", "shell"],
    "Operate": ["doctor", "reconcile", "snapshot", "reindex", "alias", "certs", "keys"],
    "Developer tools": ["bench", "bench-report", "levers", "tune", "train-reranker", "loadtest", "speed",
                        "scale-corpus", "write-visibility", "bm25-scale", "vector-scale", "store-probe", "hop-cost", "hops", "readers-bench",
                        "dashboards"],
}


def test_every_command_keeps_its_name_under_its_panel():
    group = typer.main.get_command(app)
    assert {name: cmd.rich_help_panel for name, cmd in group.commands.items()} == {
        name: panel for panel, names in PANELS.items() for name in names}
    assert list(group.commands["keys"].commands) == ["create", "rotate", "retire", "adopt", "destroy"]
    assert list(group.commands["collections"].commands) == ["drop"]
    assert list(group.commands["docs"].commands) == ["get", "delete"]
    assert list(group.commands["snapshot"].commands) == ["create", "list", "restore", "delete", "prune"]
    assert list(group.commands["alias"].commands) == ["show", "list", "switch", "rollback", "drop"]


def test_help_shows_serving_and_operations_before_the_tools():
    from typer.testing import CliRunner

    result = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    places = [result.output.index(f"─ {panel} ─") for panel in PANELS]
    assert places == sorted(places)
    assert "pip install 'hybridsearch[tools]'" in result.output


def test_tool_imports_turns_a_missing_tools_package_into_the_install_line(capsys):
    with pytest.raises(typer.Exit) as exit_:
        with tool_imports("bench"):
            raise ModuleNotFoundError("No module named 'ranx'", name="ranx")
    assert exit_.value.exit_code == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "hybridsearch bench needs ranx" in err and "pip install 'hybridsearch[tools]'" in err


def test_tool_imports_leaves_other_missing_modules_alone():
    with pytest.raises(ModuleNotFoundError):
        with tool_imports("train-reranker"):
            raise ModuleNotFoundError("No module named 'torch'", name="torch")


@pytest.fixture(scope="module")
def cli(stack, gateway):
    docs = list(read_folder(SAMPLE_CORPUS))
    for i, doc in enumerate(docs):
        doc.metadata["parity"] = "even" if i % 2 == 0 else "odd"
    gateway.index(COLLECTION, docs)
    with client_environment(stack):
        env = dict(os.environ)

    def run(*args: str) -> dict | str:
        result = subprocess.run([sys.executable, "-m", "hybridsearch.cli", "query", *args, "-c", COLLECTION],
                                env=env, capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout) if "--json" in args else result.stdout
    return run


@pytest.mark.stack
def test_json_answers_the_search(cli):
    answer = cli("reciprocal rank fusion", "--json", "-n", "3")
    assert len(answer["hits"]) == 3 and answer["legs"]


@pytest.mark.stack
def test_no_rerank_skips_the_reranker(cli):
    legs = {leg["name"]: leg["state"] for leg in cli("rank fusion", "--json", "--no-rerank")["legs"]}
    assert legs["rerank"] == "LEG_STATE_SKIPPED"


@pytest.mark.stack
def test_graph_turns_link_expansion_on(cli):
    legs = {leg["name"]: leg for leg in cli("rank fusion", "--json", "--effort", "fast", "--graph")["legs"]}
    assert legs["graph"]["state"] == "LEG_STATE_OK" and "seeds" in legs["graph"]["reason"]
    legs = {leg["name"]: leg for leg in cli("rank fusion", "--json", "--effort", "fast", "--no-graph")["legs"]}
    assert legs["graph"]["state"] == "LEG_STATE_SKIPPED"
    assert "graph: ok" in cli("rank fusion", "--effort", "fast", "--graph", "--explain")


@pytest.mark.stack
def test_min_score_drops_low_hits(cli):
    every = cli("rank fusion", "--json", "--effort", "fast", "-n", "20")["hits"]
    scores = sorted(h.get("score", 0.0) for h in every)  # JSON leaves out zeros
    cut = scores[len(scores) // 2]
    kept = cli("rank fusion", "--json", "--effort", "fast", "-n", "20", "--min-score", str(cut))["hits"]
    assert kept and len(kept) < len(every) and all(h.get("score", 0.0) >= cut for h in kept)


@pytest.mark.stack
def test_offset_pages(cli):
    first = [h["doc_id"] for h in cli("rank fusion", "--json", "--effort", "fast", "-n", "4")["hits"]]
    second = [h["doc_id"] for h in cli("rank fusion", "--json", "--effort", "fast", "-n", "2", "--offset", "2")["hits"]]
    assert second == first[2:4]


@pytest.mark.stack
def test_filter_keeps_matching_documents(cli):
    def ids(*filters: str) -> set[str]:
        args = [x for f in filters for x in ("--filter", f)]
        return {h["doc_id"] for h in cli("rank fusion", "--json", "--effort", "fast", "-n", "20", *args)["hits"]}

    odd, even, not_odd = ids("parity=odd"), ids("parity=even"), ids("parity!=odd")
    assert odd and even and not odd & even
    assert not_odd == even
    assert ids("parity=odd", "parity=even") == ids()  # a field repeated: any of its values


@pytest.mark.stack
def test_plain_output_lists_hits_and_says_where_and_the_legs_only_when_asked(cli):
    out = cli("reciprocal rank fusion", "-n", "2")
    assert " 1. " in out and " 2. " in out and f"(in {COLLECTION}, " in out.splitlines()[0]
    assert "bm25: ok" not in out and "rerank: skipped" not in out and "tag: skipped" not in out  # terse
    assert "bm25: ok" in cli("reciprocal rank fusion", "-n", "2", "-v")  # every leg's state when asked


def test_index_without_a_collection_refuses_a_users_folder_and_takes_the_samples(tmp_path):
    from hybridsearch.cli.search import target_collection

    with pytest.raises(typer.Exit) as refused:
        target_collection(tmp_path, None)
    assert refused.value.exit_code == 2
    assert target_collection(SAMPLE_CORPUS, None) == "default" and target_collection(tmp_path, "notes") == "notes"
    result = subprocess.run([sys.executable, "-m", "hybridsearch.cli", "index", str(tmp_path)], capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 2 and "-c NAME" in " ".join(result.stderr.split())


def test_index_refuses_readers_that_are_no_principals(tmp_path):
    (tmp_path / "a.md").write_text("# a\ntext")
    result = subprocess.run([sys.executable, "-m", "hybridsearch.cli", "index", str(tmp_path), "-c", "notes",
                             "--dry-run", "--acl", "group:hr", "--acl", "hr-team"], capture_output=True, text=True,
                            timeout=120)
    said = " ".join((result.stdout + result.stderr).split())
    assert result.returncode == 2 and "--acl" in said and "'hr-team'" in said, said


def legs_of(answer: dict) -> dict[str, tuple[str, str]]:
    return {leg["name"]: (leg.get("state", ""), leg.get("reason", "")) for leg in answer["legs"]}


@pytest.mark.stack
def test_no_expand_skips_expansion_and_rocchio(cli):
    answer = cli("how are variant queries weighted", "--json", "--no-expand", "--explain")
    assert legs_of(answer)["expansion"] == ("LEG_STATE_SKIPPED", "request")
    kinds = {rl.get("kind") for rl in answer["explain"]["leg_lists"]}
    assert "QUERY_KIND_FEEDBACK" not in kinds and "QUERY_KIND_LEXICAL_VARIANT" not in kinds


@pytest.mark.stack
def test_expand_on_fast_asks_the_expansion_service(cli):
    fast = legs_of(cli("how are variant queries weighted", "--json", "--effort", "fast"))
    assert fast["expansion"] == ("LEG_STATE_SKIPPED", "fast effort")
    forced = cli("how are variant queries weighted", "--json", "--effort", "fast", "--expand", "--explain")
    state, reason = legs_of(forced)["expansion"]
    assert reason != "fast effort"  # the service ran (it may still skip on a strong signal, and says why)
    if state == "LEG_STATE_OK":
        assert forced["explain"].get("lexical_variants") or forced["explain"].get("semantic_variants")
        assert "QUERY_KIND_FEEDBACK" in {rl.get("kind") for rl in forced["explain"]["leg_lists"]}


@pytest.mark.stack
def test_page_token_reads_the_next_page(cli):
    four = [h["doc_id"] for h in cli("rank fusion", "--json", "--effort", "fast", "-n", "4")["hits"]]
    first = cli("rank fusion", "--json", "--effort", "fast", "-n", "2")
    second = cli("rank fusion", "--json", "--effort", "fast", "-n", "2", "--page-token", first["next_page_token"])
    assert [h["doc_id"] for h in second["hits"]] == four[2:4]
    assert second["offset"] == 2 and "offset" not in first  # JSON leaves out zeros


def next_page_line(out: str) -> list[str]:
    """The printed next-page command's words after `query`, less `--collection cli-docs` (cli adds it)."""
    line = next(line for line in out.splitlines() if line.startswith("next page: "))
    words = shlex.split(line.removeprefix("next page: "))
    words = words[words.index("query") + 1:]
    at = words.index("--collection")
    assert words[at + 1] == COLLECTION
    return words[:at] + words[at + 2:]


@pytest.mark.stack
def test_the_next_page_hint_is_the_whole_command_and_numbers_on(cli):
    """The hint once said only `--page-token T`: without `--effort fast` that token is another query's. Its
    command runs as printed, and page 2 numbers its hits on from page 1 (3., 4.), not from 1 again."""
    first = cli("rank fusion", "--effort", "fast", "-n", "2", "--no-rerank")
    assert " 1. " in first and " 2. " in first
    words = next_page_line(first)
    assert words[:1] == ["rank fusion"] and {"--effort", "fast", "-n", "2", "--no-rerank"} <= set(words)
    second = cli(*words)
    assert " 3. " in second and " 4. " in second and " 1. " not in second
    assert " 5. " in cli(*next_page_line(second))


@pytest.mark.stack
def test_repeated_collection_searches_both(cli, gateway):
    gateway.upsert("cli-other", [document("cli-other-1", "Reciprocal rank fusion merges ranked lists by rank.")])
    answer = cli("reciprocal rank fusion", "--json", "-n", "20", "--effort", "fast", "-c", "cli-other")
    collections = {hit["collection"] for hit in answer["hits"]}
    assert collections == {COLLECTION, "cli-other"}
    assert any(leg["name"] == "bm25@cli-other" for leg in answer["legs"])


def test_the_collections_table_folds_cells_instead_of_cutting_them_and_keeps_names_whole():
    from rich.console import Console

    from hybridsearch.cli.resources import collections_table
    from hybridsearch.v1 import collections_pb2, ingest_pb2

    response = collections_pb2.ListCollectionsResponse(collections=[collections_pb2.CollectionInfo(
        name="a-rather-long-collection-name", documents=123456, chunks=654321, language="en",
        options={"boosts": '[{"field": "type", "value": "decision", "fusion": 1.3, "rerank": 1.25}]'},
        stores=[ingest_pb2.StoreSummary(store="bm25", engine="embedded-tantivy", documents=123456),
                ingest_pb2.StoreSummary(store="vector", engine="qdrant-edge+minilm-l6", documents=123456)])])
    for width in (40, 60, 80):
        console = Console(width=width, record=True)
        console.print(collections_table(response))
        text = console.export_text()
        assert "…" not in text, text
        assert "a-rather-long-collection-name" in text.split(), text  # a name is never broken (cli/tables.py)
        if width == 80:
            assert {"123456", "654321"} <= set(text.split()), text


@pytest.mark.stack
def test_bench_takes_a_collection_name(stack, tmp_path):
    folder = tmp_path / "tiny"
    (folder / "qrels").mkdir(parents=True)
    docs = [{"_id": f"d{i}", "title": t, "text": f"{t}: a note on {t.lower()}"} for i, t in
            enumerate(("Apple orchards", "Pear trees", "Honey bees"))]
    (folder / "corpus.jsonl").write_text("\n".join(json.dumps(d) for d in docs))
    (folder / "queries.jsonl").write_text(json.dumps({"_id": "q1", "text": "honey bees"}))
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td2\t1\n")
    with client_environment(stack):
        env = dict(os.environ)
    result = subprocess.run([sys.executable, "-m", "hybridsearch.cli", "bench", str(folder), "-c", "bench-named",
                             "--modes", "bm25", "--json", "--no-start"], env=env, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["collection"] == "bench-named" and report["modes"]["bm25"]["ndcg@10"] == 1.0
