"""build_engine: the configured engine, with the collections' declared text fields."""

from __future__ import annotations

import pytest

from hybridsearch.bm25.service import build_engine
from hybridsearch.common.config import Settings


@pytest.fixture(autouse=True)
def no_declared_collections(monkeypatch):
    """Only what a test declares (a session stack may have put HYBRIDSEARCH_COLLECTIONS in the environment)."""
    monkeypatch.delenv("HYBRIDSEARCH_COLLECTIONS", raising=False)
    monkeypatch.delenv("HYBRIDSEARCH_COLLECTIONS_FILE", raising=False)


def test_bm25s_refuses_collections_that_declare_text_fields(tmp_path):
    settings = Settings(data_dir=tmp_path, bm25={"engine": "bm25s"}, collections={"code": {"fields": {"summary": 2.0}}})
    with pytest.raises(ValueError, match=r"bm25s does not index text fields.*\['code'\].*embedded"):
        build_engine(settings)
    assert build_engine(Settings(data_dir=tmp_path, bm25={"engine": "bm25s"}, collections={"notes": {"fuzzy": True}}))


def test_the_embedded_engine_reads_each_collections_fields(tmp_path):
    settings = Settings(data_dir=tmp_path, collections={"code": {"fields": {"summary": 2.0, "path": 0.5}}})
    engine = build_engine(settings)
    assert engine.fields_of("code") == {"summary": 2.0, "path": 0.5}
    assert engine.fields_of("other") == {}
