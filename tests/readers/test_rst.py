from hybridsearch.readers.base import SourceFile
from hybridsearch.readers.rst import RstReader

GUIDE = """\
=============
Install guide
=============

:tags: setup, linux
:date: 2024-01-02
:author: Ann

Linux
-----

Run ``make install``.
"""


def test_title_and_bibliographic_fields(tmp_path):
    (tmp_path / "guide.rst").write_text(GUIDE)
    [doc] = RstReader().read(SourceFile(tmp_path / "guide.rst", tmp_path))
    assert doc.title == "Install guide" and doc.text == GUIDE  # the source: hits cite its lines
    meta = dict(doc.metadata)
    assert (meta["tags"], meta["date"], meta["author"], meta["type"]) == ("setup, linux", "2024-01-02", "Ann", "rst")


def test_broken_markup_still_reads(tmp_path):
    (tmp_path / "bad.rst").write_text("Title\n===\n\n.. unknown-directive::\n\n`unclosed\n")
    [doc] = RstReader().read(SourceFile(tmp_path / "bad.rst", tmp_path))
    assert "unclosed" in doc.text
