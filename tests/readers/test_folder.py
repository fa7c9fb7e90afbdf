"""A folder: which files, which reader, what was skipped and why."""

from pathlib import Path

import pytest

from hybridsearch.readers.folder import Folder, matches
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
    assert folder.skipped.line == "1 skipped: .json 1" and "JSONDecodeError" in folder.skipped.reasons[".json"]


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
