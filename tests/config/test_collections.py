"""Per-collection configuration: declared in a file and/or the environment, validated, defaults for the rest."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from hybridsearch.config.collections import DEFAULT, CollectionConfig, collection_config
from hybridsearch.config.settings import Settings


def test_undeclared_collection_gets_defaults_that_change_nothing():
    settings = Settings(collections={})
    config = collection_config(settings, "anything")
    assert config == DEFAULT
    assert (config.fuzzy, config.language, config.fields, config.tag_leg, config.boosts) == (False, "en", {}, False, [])


def test_file_is_read_and_the_mapping_goes_on_top(tmp_path):
    path = tmp_path / "collections.yaml"
    path.write_text("notes:\n  fuzzy: true\n  fields: {summary: 2.0, path: 0.5}\n"
                    "  boosts:\n    - {field: status, value: done, fusion: 0.6, rerank: 0.7}\n"
                    "code:\n  language: de\n")
    settings = Settings(collections_file=path, collections={"code": {"language": "en", "tag_leg": True}})
    notes = collection_config(settings, "notes")
    assert notes.fuzzy and notes.fields == {"summary": 2.0, "path": 0.5}
    assert (notes.boosts[0].fusion, notes.boosts[0].rerank) == (0.6, 0.7)
    code = collection_config(settings, "code")
    assert code.language == "en" and code.tag_leg  # the mapping replaces the file's entry


def test_environment_json(monkeypatch):
    monkeypatch.setenv("HYBRIDSEARCH_COLLECTIONS", '{"docs": {"fuzzy": true}}')
    assert collection_config(Settings(), "docs").fuzzy


@pytest.mark.parametrize("body, message", [
    ({"fields": {"a.b": 1.0}}, "not a metadata key"),
    ({"fields": {"summary": 0}}, "outside"),
    ({"boosts": [{"field": "type", "value": "x", "fusion": -1}]}, "greater than 0"),
    ({"boosts": [{"field": "ty pe", "value": "x"}]}, "not a metadata key"),
    ({"language": "german"}, "not supported: choose one of en, de"),
    ({"sealed_terms": "hashed"}, "sealed_terms: hashed needs sealed: true"),
    ({"sealed": True, "sealed_terms": "hashed", "fuzzy": True}, "fuzzy: true cannot apply to sealed_terms: hashed"),
    ({"sealed": True, "sealed_terms": "hash"}, "Input should be 'clear' or 'hashed'"),
])
def test_bad_declarations_are_refused_with_a_reason(body, message):
    with pytest.raises(ValidationError, match=message):
        CollectionConfig.model_validate(body)


def test_bad_collection_name_is_refused():
    with pytest.raises(ValidationError, match="not a collection name"):
        Settings(collections={"Bad Name": {}})


def test_sealed_terms_are_clear_unless_declared_hashed():
    assert not CollectionConfig(sealed=True).hashed_terms
    assert CollectionConfig.model_validate({"sealed": True, "sealed_terms": "hashed"}).hashed_terms
