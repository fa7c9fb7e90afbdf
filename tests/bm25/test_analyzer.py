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
