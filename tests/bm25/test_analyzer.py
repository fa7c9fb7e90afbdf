from hybridsearch.bm25.analyzer import EnglishAnalyzer


def test_lucene_english_chain():
    analyzer = EnglishAnalyzer()
    assert analyzer.analyze("The Indexing of John's documents is running") == ["index", "john", "document", "run"]


def test_no_stopwords_option_keeps_them():
    assert "the" in EnglishAnalyzer(stopwords="none").analyze("the cat")


def test_unicode_words_and_numbers():
    assert EnglishAnalyzer().analyze("Café 42 naïve") == ["café", "42", "naïv"]
