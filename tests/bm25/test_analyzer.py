import pytest

from hybridsearch.bm25.analyzer import EnglishAnalyzer


def test_lucene_english_chain():
    analyzer = EnglishAnalyzer()
    assert analyzer.analyze("The Indexing of John's documents is running") == ["index", "john", "document", "run"]


def test_no_stopwords_option_keeps_them():
    assert "the" in EnglishAnalyzer(stopwords="none").analyze("the cat")


def test_unicode_words_and_numbers():
    assert EnglishAnalyzer().analyze("Café 42 naïve") == ["café", "42", "naïv"]


def test_en_plus_stopwords_drop_more_function_words():
    from hybridsearch.bm25.analyzer import EnglishAnalyzer

    text = "What should we do about those very few cases"
    assert EnglishAnalyzer("porter", "lucene").analyze(text) == ["what", "should", "we", "do", "about", "those", "veri", "few", "case"]
    assert EnglishAnalyzer("porter", "en_plus").analyze(text) == ["case"]


def test_unknown_stopword_list_is_refused():
    import pytest

    from hybridsearch.bm25.analyzer import EnglishAnalyzer

    with pytest.raises(ValueError, match="unknown stopword list"):
        EnglishAnalyzer("porter", "klingon")


def test_german_stems_inflected_forms_together_and_drops_german_stopwords():
    from hybridsearch.bm25.analyzer import Analyzers

    german = Analyzers().language("de")
    assert german.analyze("die Häuser") == german.analyze("das Haus") == ["haus"]
    assert german.analyze("Wälder") == german.analyze("Wald") == ["wald"]
    assert german.analyze("und der die das ein über") == []
    # English analysis keeps German stopwords and does not fold the plural.
    assert EnglishAnalyzer("porter", "en_plus").analyze("die Häuser") == ["die", "häuser"]


def test_english_collections_keep_the_configured_english_analyzer():
    from hybridsearch.bm25.analyzer import Analyzers

    analyzers = Analyzers("porter", "lucene", {"notes": "de"}.get)
    assert analyzers.for_collection("notes").language == "de"
    english = Analyzers("porter", "lucene").for_collection("anything")
    text = "The patient's cells were Activated"
    assert english.analyze(text) == EnglishAnalyzer("porter", "lucene").analyze(text) == ["patient", "cell", "were", "activ"]
    assert english.analyze_query(text) == english.analyze(text) and english.for_document(text) is english


def test_auto_analyzes_a_document_in_its_language_and_a_query_in_every_language():
    from hybridsearch.bm25.analyzer import Analyzers

    auto = Analyzers().language("auto")
    german = auto.for_document("Nach dem Regen wurden viele Häuser in der Altstadt überflutet.")
    english = auto.for_document("After the rain many houses in the old town were flooded.")
    assert german.analyze("Häuser") == ["de:haus"] and english.analyze("houses") == ["en:hous"]
    query = auto.analyze_query("Haus")
    assert "de:haus" in query and "en:hau" in query and len(query) == 12  # one term per supported language


def test_an_unknown_language_has_no_analyzer():
    from hybridsearch.bm25.analyzer import Analyzers

    with pytest.raises(ValueError, match="no analyzer for language 'xx'"):
        Analyzers().language("xx")
