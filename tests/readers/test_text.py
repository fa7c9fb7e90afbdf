from hybridsearch.readers.base import SourceFile, metadata
from hybridsearch.readers.text import TextReader


def test_plain_text_is_one_document_titled_by_its_name(tmp_path):
    (tmp_path / "readme.txt").write_text("Line one.\nLine two.\n")
    [doc] = TextReader().read(SourceFile(tmp_path / "readme.txt", tmp_path))
    assert (doc.id, doc.title, doc.text) == ("readme.txt", "readme", "Line one.\nLine two.\n")
    assert dict(doc.metadata)["type"] == "txt"


def test_metadata_keys_are_made_valid_and_values_kept_within_the_limits():
    out = metadata({"path": "a"}, {"due date": "x", "path": "not the file's", "n": 3, "ok": True, "big": "v" * 5000,
                                  "none": None, "": "empty key"})
    assert out == {"path": "a", "due_date": "x", "n": "3", "ok": "true", "big": "v" * 1024}
    many = metadata({}, {f"k{i}": "v" for i in range(100)})
    assert len(many) == 64
