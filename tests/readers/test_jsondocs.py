import json

import pytest

from hybridsearch.readers.base import SourceFile
from hybridsearch.readers.jsondocs import FieldMap, JsonReader


def test_default_fields_of_a_list_and_of_lines(tmp_path):
    (tmp_path / "faq.json").write_text(json.dumps([
        {"id": "q1", "title": "Reset password", "body": "Use the link.", "team": "support", "tags": ["auth", "ui"]},
        {"name": "No id", "content": "Second record."},
        {"id": "empty", "team": "x"},  # neither title nor text: not a document
    ]))
    (tmp_path / "log.jsonl").write_text('{"_id": "e1", "text": "Disk full", "metadata": {"severity": "high"}, "x": 1}\n\n')
    reader = JsonReader()
    docs = list(reader.read(SourceFile(tmp_path / "faq.json", tmp_path)))
    assert [(d.id, d.title, d.text) for d in docs] == [("q1", "Reset password", "Use the link."),
                                                       ("faq.json:1", "No id", "Second record.")]
    [skip] = reader.skips  # said, not silently dropped
    assert skip.where == "faq.json record 3" and skip.reason.startswith("no text") and not skip.bad_json
    assert dict(docs[0].metadata)["team"] == "support" and dict(docs[0].metadata)["tags"] == "auth, ui"
    [line] = JsonReader().read(SourceFile(tmp_path / "log.jsonl", tmp_path))
    meta = dict(line.metadata)
    assert line.id == "e1" and meta["severity"] == "high" and "x" not in meta and meta["type"] == "jsonl"


def test_a_field_map_names_the_fields(tmp_path):
    (tmp_path / "papers.json").write_text(json.dumps({"doi": "10.1/x", "headline": "BM25", "abstract": "Scores."}))
    fields = FieldMap.parse(["id=doi", "title=headline", "text=abstract"])
    [doc] = JsonReader(fields).read(SourceFile(tmp_path / "papers.json", tmp_path))
    assert (doc.id, doc.title, doc.text) == ("10.1/x", "BM25", "Scores.")
    with pytest.raises(ValueError, match="ROLE=FIELD"):
        FieldMap.parse(["summary=abstract"])
