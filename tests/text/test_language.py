"""Query and document language detection: lingua over the supported languages, with a confidence floor."""

from __future__ import annotations

import pytest

from hybridsearch.text.language import (
    CONFIDENCE_FLOOR,
    Source,
    check_collection_language,
    check_language,
    detect,
    fallback_language,
    query_language,
)
from hybridsearch.contract.errors import InvalidArgument


@pytest.mark.parametrize("text, language", [
    ("Wie wirkt Koffein auf den Schlaf", "de"),
    ("Ursachen der Entzündung", "de"),
    ("Kündigung Mietvertrag", "de"),
    ("how does caffeine affect sleep", "en"),
    ("treatment of diabetes", "en"),
    ("les effets du café sur le sommeil", "fr"),
])
def test_queries_of_a_few_words_are_detected(text, language):
    got = detect(text, fallback="en")
    assert (got.language, got.source) == (language, Source.DETECTED)
    assert got.confidence >= CONFIDENCE_FLOOR


@pytest.mark.parametrize("text", ["BM25", "API", "RRF", "3.5", "COVID-19"])
def test_names_and_acronyms_fall_back_to_the_collection_language(text):
    got = detect(text, fallback="de")
    assert (got.language, got.source) == ("de", Source.COLLECTION)


def test_a_request_override_wins_and_an_auto_collection_falls_back_to_english():
    assert query_language("Wie wirkt Koffein", "en", requested="FR") == query_language("x", "de", "fr")
    assert query_language("Wie wirkt Koffein", "en", requested="fr").source == Source.REQUEST
    assert fallback_language("auto") == "en" and fallback_language("de") == "de"
    assert query_language("BM25", "auto").language == "en"


def test_unsupported_languages_are_refused_with_the_choices():
    with pytest.raises(InvalidArgument, match="choose one of en, de"):
        check_language("klingon")
    with pytest.raises(ValueError, match="or auto"):
        check_collection_language("xx")
    assert check_collection_language(" AUTO ") == "auto" and check_language("De") == "de"


def test_the_floor_keeps_short_queries_from_a_wrong_language():
    """The measurement behind CONFIDENCE_FLOOR (tests/data/languages/compare_detectors.py compares detectors)."""
    import json
    from pathlib import Path

    data = json.loads((Path(__file__).parent.parent / "data" / "languages" / "short_queries.json").read_text())
    cases = [(q, "en") for q in data["en"]] + [(q, "de") for q in data["de"]]
    got = [(detect(q, fallback="xx"), want) for q, want in cases]
    right = sum(d.language == want for d, want in got)
    wrong = sum(d.language not in (want, "xx") for d, want in got)
    names = sum(detect(q, fallback="xx").source == Source.DETECTED for q in data["names"])
    print(f"floor {CONFIDENCE_FLOOR}: right {right}/{len(cases)}, wrong {wrong}, "
          f"collection's language {len(cases) - right - wrong}; names taken for a language {names}/{len(data['names'])}")
    assert wrong == 0 and right >= 33 and names <= 2


def test_feedback_reads_documents_in_the_collection_language_or_the_query_language_in_auto():
    from hybridsearch.text.language import Detection, documents_language

    german_query = Detection("de", 0.9, Source.DETECTED)
    assert documents_language("en", german_query) == "en"  # an English collection's feedback stays English
    assert documents_language("auto", german_query) == "de"
