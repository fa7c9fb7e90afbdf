"""A folder: which files, which reader, what was skipped and why."""

import urllib.parse
from pathlib import Path

import pytest

from hybridsearch.readers.folder import Folder, Reason, matches
from hybridsearch.readers.jsondocs import FieldMap
from hybridsearch.readers.registry import READERS, Kind, ReaderMissing, reader_class


def make(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def test_unknown_files_are_counted_by_extension_and_hidden_folders_left_out(tmp_path):
    make(tmp_path, {"a.md": "# A\n\ntext", "b.txt": "b", "c.png": "x", "d.png": "x", "e.lock": "x", "Makefile": "x",
                    ".git/config.md": "x", "node_modules/m.js": "x", "src/f.py": "def f():\n    pass\n"})
    folder = Folder(tmp_path)
    docs = list(folder.documents(folder.readable()))
    assert sorted(d.id for d in docs) == ["a.md", "b.txt", "src/f.py"]
    assert folder.skipped.line == "4 skipped: .png 2, .lock 1, (none) 1"


def test_include_and_exclude_globs(tmp_path):
    make(tmp_path, {"docs/a.md": "a", "docs/draft/b.md": "b", "src/c.py": "x = 1", "notes.txt": "n"})
    assert matches("docs/draft/b.md", ["*.md"]) and matches("docs/draft/b.md", ["docs/*"])
    folder = Folder(tmp_path, include=["*.md", "src/*"], exclude=["docs/draft/*"])
    assert sorted(d.id for d in folder.documents(folder.readable())) == ["docs/a.md", "src/c.py"]
    assert folder.skipped.total == 0  # left out by the globs, not skipped


def test_an_unreadable_file_is_skipped_with_its_reason(tmp_path):
    make(tmp_path, {"bad.json": "{not json", "good.json": '{"id": "g", "text": "fine"}'})
    folder = Folder(tmp_path)
    assert [d.id for d in folder.documents(folder.readable())] == ["g"]
    [skip] = folder.skips
    assert (skip.where, skip.reason) == ("bad.json", Reason.UNREADABLE) and "JSONDecodeError" in skip.detail
    assert folder.skipped.total == 0  # a file with a reader is offered: skipped with its reason, not "no reader"


def read(folder: Folder) -> list[str]:
    return [d.id for d in folder.documents(folder.readable())]


def test_file_names_give_distinct_reversible_ids(tmp_path):
    """A newline in a name no longer maps onto the `_` of a real file beside it: one silently replaced the other."""
    make(tmp_path, {"new\nline.md": "# A\n\nfirst", "new_line_.md": "# B\n\nsecond", "a b#c%.md": "# C\n\nthird"})
    folder = Folder(tmp_path)
    ids = read(folder)
    assert sorted(ids) == ["a%20b%23c%25.md", "new%0Aline.md", "new_line_.md"] and not folder.skips
    assert sorted(urllib.parse.unquote(i) for i in ids) == sorted(["new\nline.md", "new_line_.md", "a b#c%.md"])


def test_long_names_sharing_a_head_keep_distinct_ids(tmp_path):
    head = "d" * 120 + "/" + "e" * 120 + "/" + "f" * 40
    make(tmp_path, {f"{head}/one.md": "one", f"{head}/two.md": "two"})
    ids = read(Folder(tmp_path))
    assert len(set(ids)) == 2 and all(len(i) <= 256 for i in ids)


def test_one_file_over_a_limit_is_skipped_and_the_rest_indexed(tmp_path):
    make(tmp_path, {"big.html": "<p>" + "x" * 1_100_000 + "</p>", "ok.md": "# Fine\n\ntext",
                    "title.md": "---\ntitle: " + "t" * 2000 + "\n---\n\nbody"})
    folder = Folder(tmp_path)
    assert read(folder) == ["ok.md"]
    reasons = {s.where: (s.reason, s.detail) for s in folder.skips}
    assert reasons["big.html"][0] is Reason.OVER_A_LIMIT and "the limit is 1000000" in reasons["big.html"][1]
    assert reasons["title.md"][0] is Reason.OVER_A_LIMIT and "title is 2000 characters" in reasons["title.md"][1]


def test_binary_files_are_detected_and_skipped(tmp_path):
    (tmp_path / "noise.md").write_bytes(bytes(range(256)) * 256)  # 64 KiB named .md
    (tmp_path / "latin1.txt").write_bytes("caf\xe9 ".encode("latin-1") * 10)
    make(tmp_path, {"real.md": "# Real\n\ntext"})
    folder = Folder(tmp_path)
    assert read(folder) == ["real.md"]
    assert {(s.where, s.reason) for s in folder.skips} == {("noise.md", Reason.BINARY), ("latin1.txt", Reason.BINARY)}


def test_symlinks_leaving_the_folder_are_not_followed_unless_asked(tmp_path):
    outside, root = tmp_path / "outside", tmp_path / "root"
    make(outside, {"secret.md": "# Secret\n\nkeys", "dir/inner.md": "inner"})
    make(root, {"own.md": "# Own\n\ntext"})
    (root / "link.md").symlink_to(outside / "secret.md")
    (root / "linked-dir").symlink_to(outside / "dir")
    (root / "alias.md").symlink_to(root / "own.md")  # inside the folder: read
    folder = Folder(root)
    assert sorted(read(folder)) == ["alias.md", "own.md"]
    assert {(s.where, s.reason) for s in folder.skips} == {("link.md", Reason.SYMLINK_OUTSIDE),
                                                           ("linked-dir/", Reason.SYMLINK_OUTSIDE)}
    followed = Folder(root, follow_symlinks=True)
    assert sorted(read(followed)) == ["alias.md", "link.md", "linked-dir/inner.md", "own.md"] and not followed.skips


def test_bad_jsonl_lines_and_records_without_text_are_skipped_with_their_lines(tmp_path):
    make(tmp_path, {"log.jsonl": '{"id": "a", "text": "one"}\n{broken\n[1, 2]\n{"id": "b", "text": "two"}\n'
                                 '{"id": "c", "title": ""}\n'})
    folder = Folder(tmp_path)
    assert read(folder) == ["a", "b"]
    assert [(s.where, s.reason) for s in folder.skips] == [
        ("log.jsonl line 2", Reason.BAD_RECORD), ("log.jsonl line 3", Reason.BAD_RECORD),
        ("log.jsonl line 5", Reason.NO_TEXT)]


def test_a_field_map_no_record_has_counts_every_record_skipped(tmp_path):
    make(tmp_path, {"papers.jsonl": '{"id": "p1", "body": "x"}\n{"id": "p2", "body": "y"}\n'})
    folder = Folder(tmp_path, fields=FieldMap.parse(["text=abstract"]))
    assert read(folder) == []
    assert [s.reason for s in folder.skips] == [Reason.NO_TEXT, Reason.NO_TEXT]
    assert "abstract" in folder.skips[0].detail


def test_a_repeated_record_id_is_refused_naming_both(tmp_path):
    make(tmp_path, {"a.json": '[{"id": "x", "text": "first"}, {"id": "y", "text": "other"}]',
                    "b.json": '{"id": "x", "text": "second"}'})
    folder = Folder(tmp_path)
    assert read(folder) == ["x", "y"]
    [skip] = folder.skips
    assert skip.where == "b.json" and skip.reason is Reason.ID_COLLISION and "a.json (x)" in skip.detail


def test_every_extension_has_a_reader_that_loads():
    assert {".md", ".rst", ".html", ".json", ".jsonl", ".py", ".go", ".java", ".js", ".ts", ".pdf"} <= set(READERS)
    for kind in Kind:
        assert callable(reader_class(kind)().read)


def test_a_missing_library_names_the_extra(monkeypatch):
    import builtins

    real = builtins.__import__

    def no_docutils(name, *args, **kwargs):
        if name.startswith("docutils"):
            raise ModuleNotFoundError(f"No module named {name!r}", name="docutils")
        return real(name, *args, **kwargs)

    reader_class.cache_clear()
    monkeypatch.delitem(__import__("sys").modules, "hybridsearch.readers.rst", raising=False)
    monkeypatch.setattr(builtins, "__import__", no_docutils)
    try:
        with pytest.raises(ReaderMissing, match=r"hybridsearch\[readers\]"):
            reader_class(Kind.RST)
    finally:
        reader_class.cache_clear()


def test_source_files_of_every_language_go_to_the_code_reader(tmp_path):
    languages = {"run.sh": "bash", "lib.bash": "bash", "lib.rs": "rust", "buf.c": "c", "buf.h": "c", "a.cc": "cpp",
                 "b.cpp": "cpp", "c.cxx": "cpp", "d.hpp": "cpp", "e.hh": "cpp", "f.hxx": "cpp", "G.cs": "c_sharp",
                 "box.rb": "ruby"}
    make(tmp_path, {name: "x\n" for name in languages})
    folder = Folder(tmp_path)
    docs = list(folder.documents(folder.readable()))
    assert {d.id: d.metadata["language"] for d in docs} == languages
    assert folder.skipped.total == 0 and not folder.skips
