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
