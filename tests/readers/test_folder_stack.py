"""`hybridsearch index` on a real folder through the real stack: every kind of file with its fields, the
skipped files counted, and a function's name finding its chunk with path, symbol, line span, the asked
metadata and its neighbours."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from stacks import client_environment

from hybridsearch.client import search_request
from hybridsearch.v1 import ingest_pb2

pytestmark = pytest.mark.stack

FILES = {
    "notes/postgres.md": "---\ntitle: Choosing Postgres\ntags: [postgres, database]\nowner: alice\n---\n\n"
                         "# Decision\n\nWe keep JSONB documents in Postgres.\n",
    "docs/install.rst": "Install guide\n=============\n\n:owner: bob\n\nRun the installer twice on Solaris.\n",
    "site/index.html": "<html><head><title>Release notes</title></head><body><p>Quokka mode ships.</p>"
                       "<script>hidden()</script></body></html>",
    "data/faq.json": json.dumps([{"id": "faq-1", "title": "Reset", "text": "Use the reset link.", "owner": "carol"}]),
    "src/app.py": "import os\n\n\ndef helper():\n    return 1\n\n\ndef frobnicate_widgets(count):\n"
                  "    \"\"\"Frobnicates the widgets.\"\"\"\n    return count * 2\n\n\ndef after():\n    return 3\n",
    "src/server.go": "package main\n\nfunc ServeQuokkas(port int) error {\n\treturn nil\n}\n",
    "img/logo.png": "not really a png",
    "img/icon.png": "nor this",
    "Cargo.lock": "lock",
}


@pytest.fixture(scope="module")
def indexed(stack, tmp_path_factory):
    folder = tmp_path_factory.mktemp("folder")
    for name, text in FILES.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    with client_environment(stack):
        env = dict(os.environ)
    result = subprocess.run([sys.executable, "-m", "hybridsearch.cli", "index", str(folder), "-c", "readers-a"],
                            env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    return result.stderr


def test_the_summary_counts_what_was_skipped(indexed):
    assert "3 skipped: .png 2, .lock 1" in indexed
    assert "6 documents: 6 written" in indexed


def test_a_function_name_finds_its_chunk_with_path_symbol_and_line_span(indexed, gateway):
    answer = gateway.search(search_request("frobnicate_widgets", collection="readers-a", mode="bm25", effort="fast",
                                           return_metadata=["symbol", "symbol_kind", "owner"], context=1))
    top = answer.hits[0]
    assert (top.doc_id, top.path, top.type) == ("src/app.py", "src/app.py", "py")
    assert dict(top.metadata) == {"symbol": "frobnicate_widgets", "symbol_kind": "def"}
    assert (top.citation.chunk.start_line, top.citation.chunk.end_line) == (8, 10)
    source = FILES["src/app.py"]
    chunk = source[top.citation.chunk.start_char:top.citation.chunk.end_char]
    assert chunk.startswith("def frobnicate_widgets") and chunk.endswith("return count * 2")
    assert chunk[top.citation.snippet.start:top.citation.snippet.end].split() == top.snippet.split()
    assert top.modified.endswith("+00:00")
    [before], [after] = top.context_before, top.context_after
    assert "def helper" in before.text and (before.span.start_line, before.span.end_line) == (4, 5)
    assert "def after" in after.text


def test_each_kind_of_file_has_its_fields(indexed, gateway):
    def top(query: str):
        answer = gateway.search(search_request(query, collection="readers-a", mode="bm25", effort="fast",
                                               return_metadata=["owner", "tags", "symbol"]))
        return answer.hits[0]

    md = top("JSONB documents")
    assert (md.title, md.path, dict(md.metadata)) == ("Choosing Postgres", "notes/postgres.md",
                                                      {"owner": "alice", "tags": "postgres, database"})
    assert "---" not in md.snippet and md.citation.chunk.start_line == 7  # lines of the file, front matter counted
    rst = top("installer Solaris")
    assert (rst.title, rst.type, rst.metadata["owner"]) == ("Install guide", "rst", "bob")
    html = top("Quokka mode ships")
    assert (html.title, html.type) == ("Release notes", "html") and "hidden" not in html.snippet
    faq = top("reset link")
    assert (faq.doc_id, faq.metadata["owner"], faq.type) == ("faq-1", "carol", "json")
    go = top("ServeQuokkas")
    assert (go.path, go.metadata["symbol"], go.citation.chunk.start_line) == ("src/server.go", "ServeQuokkas", 3)


def test_a_hit_shows_its_own_collection_s_metadata(indexed, gateway):
    """Two collections with a document of the same id: each hit carries its own collection's fields."""
    gateway.index("readers-b", [ingest_pb2.Document(id="notes/postgres.md", title="Choosing Postgres",
                                                    text="We keep JSONB documents in Postgres.",
                                                    metadata={"owner": "mallory", "path": "elsewhere.md"})])
    answer = gateway.search(search_request("JSONB documents Postgres", collections=["readers-a", "readers-b"],
                                           mode="bm25", effort="fast", return_metadata=["owner"]))
    owners = {(h.collection, h.doc_id): (h.metadata["owner"], h.path) for h in answer.hits if h.doc_id == "notes/postgres.md"}
    assert owners == {("readers-a", "notes/postgres.md"): ("alice", "notes/postgres.md"),
                      ("readers-b", "notes/postgres.md"): ("mallory", "elsewhere.md")}


def test_bad_return_metadata_and_context_are_invalid_argument(indexed, gateway):
    from hybridsearch.client import HybridSearchError

    for options, message in (({"return_metadata": ["a.b"]}, "return_metadata[0]"), ({"context": 9}, "context must be")):
        with pytest.raises(HybridSearchError) as err:
            gateway.search(search_request("x", collection="readers-a", **options))
        assert err.value.code().name == "INVALID_ARGUMENT" and message in err.value.details()


# Every file offered is indexed or skipped with its reason (issue 32): through `hybridsearch index` and the
# real gateway, a folder of the cases that were lost or refused silently, or that failed the whole folder.

def run_index(stack, *args: str) -> subprocess.CompletedProcess:
    with client_environment(stack):
        env = dict(os.environ)
    return subprocess.run([sys.executable, "-m", "hybridsearch.cli", "index", *args], env=env, capture_output=True,
                          text=True, timeout=300)


@pytest.fixture(scope="module")
def hostile_folder(tmp_path_factory):
    root, outside = tmp_path_factory.mktemp("hostile"), tmp_path_factory.mktemp("outside")
    files = {"new\nline.md": "# Newline\n\nThe file whose name holds a newline.",
             "new_line_.md": "# Underscores\n\nThe real file beside it.",
             "good.md": "# Good\n\nA good file the bad ones must not take down.",
             "title.md": "---\ntitle: " + "t" * 2000 + "\n---\n\nBody under a title over the limit.",
             "log.jsonl": '{"id": "l1", "text": "first line"}\n{broken\n{"id": "l3", "text": "third line"}\n'}
    for name, text in files.items():
        (root / name).write_text(text)
    (root / "big.html").write_text("<p>" + "word " * 1_000_000 + "</p>")  # 5 MB on one line
    (root / "noise.md").write_bytes(bytes(range(256)) * 256)  # 64 KiB of binary named .md
    (outside / "secret.md").write_text("# Secret\n\nOutside the folder.")
    (root / "link.md").symlink_to(outside / "secret.md")
    return root


def test_a_folder_of_bad_files_indexes_the_good_ones_and_says_why_each_other_was_skipped(stack, gateway,
                                                                                         hostile_folder):
    result = run_index(stack, str(hostile_folder), "-c", "folder-hostile")
    out = result.stdout + result.stderr
    assert result.returncode == 3, out  # indexed, some skipped
    assert "Traceback" not in out
    assert "5 not indexed" in out and "binary 1" in out and "over a limit 2" in out
    assert "symlink leaving the folder 1" in out and "bad JSON line 1" in out
    assert "log.jsonl line 2" in out and "noise.md" in out and "big.html" in out and "title.md" in out
    got = gateway.get_documents("folder-hostile", ["new%0Aline.md", "new_line_.md", "good.md", "l1", "l3",
                                                   "link.md", "noise.md", "big.html", "title.md"])
    assert sorted(d.id for d in got.documents) == ["good.md", "l1", "l3", "new%0Aline.md", "new_line_.md"]
    assert sorted(got.missing) == ["big.html", "link.md", "noise.md", "title.md"]
    texts = {d.id: d.text for d in got.documents}
    assert "newline" in texts["new%0Aline.md"] and "real file" in texts["new_line_.md"]  # neither replaced the other


def test_follow_symlinks_indexes_the_link_and_dry_run_writes_nothing(stack, gateway, hostile_folder):
    dry = run_index(stack, str(hostile_folder), "-c", "folder-dry", "--dry-run", "--follow-symlinks")
    assert dry.returncode == 3 and "dry run: 6 documents from 5 files would be indexed" in dry.stdout + dry.stderr
    assert "symlink" not in dry.stdout + dry.stderr
    from hybridsearch.client import NotFound
    with pytest.raises(NotFound):
        gateway.stats("folder-dry")
    followed = run_index(stack, str(hostile_folder), "-c", "folder-followed", "--follow-symlinks",
                         "--include", "link.md")
    assert followed.returncode == 0, followed.stdout + followed.stderr
    assert [d.id for d in gateway.get_documents("folder-followed", ["link.md"]).documents] == ["link.md"]


def test_a_field_map_no_record_has_is_counted_and_fails(stack, tmp_path):
    (tmp_path / "papers.jsonl").write_text('{"id": "p1", "body": "x"}\n{"id": "p2", "body": "y"}\n')
    result = run_index(stack, str(tmp_path), "-c", "folder-fieldmap", "--field-map", "text=abstract")
    out = result.stdout + result.stderr
    assert result.returncode == 1, out
    assert "2 not indexed: no text 2" in out and "abstract" in out and "nothing to index" in out
