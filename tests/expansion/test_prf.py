from hypothesis import given
from hypothesis import strategies as st

from hybridsearch.bm25.analyzer import EnglishAnalyzer
from hybridsearch.expansion.prf import WORD, feedback_terms, prf_variants


def test_feedback_terms_come_from_top_documents_not_the_query():
    docs = [("insulin regulates glucose in diabetes patients", 10.0),
            ("glucose insulin resistance diabetes", 8.0),
            ("unrelated astronomy text", 0.5)]
    terms = feedback_terms("diabetes treatment", docs, EnglishAnalyzer(), 3)
    assert "diabetes" not in terms
    assert set(terms[:2]) == {"insulin", "glucose"}


def test_no_documents_no_terms():
    assert feedback_terms("q", [], EnglishAnalyzer(), 5) == []
    assert prf_variants("q", []) == ([], [])


def test_variants_extend_the_query():
    lexical, semantic = prf_variants("what is the role of insulin?", ["glucose", "pancreas", "diabetes", "cells"])
    assert lexical == ["what is the role of insulin? glucose pancreas diabetes cells"]
    assert semantic == ["the role of insulin glucose pancreas diabetes"]


def test_german_feedback_reads_umlauts_and_skips_german_stopwords():
    from hybridsearch.bm25.analyzer import Analyzers

    docs = [("Die Häuser über dem Fluss wurden überflutet, und die Keller standen unter Wasser", 9.0),
            ("Überflutete Keller: das Wasser stand in den Häusern", 7.0)]
    terms = feedback_terms("Hochwasser Haus", docs, Analyzers().language("de"), 4)
    assert "keller" in terms and "wasser" in terms
    assert not {"die", "und", "über", "unter", "dem"} & set(terms)  # German stopwords
    assert not {"häuser", "häusern"} & set(terms)  # the query's own stem (haus)
    assert "überflutet" in terms or "überflutete" in terms  # words with umlauts are words


def test_english_feedback_keeps_words_of_any_script_whole():
    """The English word pattern was ASCII-only: "über" became the term "ber", "naïve" the fragment "ve"."""
    docs = [("Reviews of über-apps: a naïve über design, the über model", 9.0),
            ("über pricing and naïve surge models", 7.0)]
    terms = feedback_terms("ride pricing", docs, EnglishAnalyzer(), 4)
    assert "über" in terms and "naïve" in terms
    assert not {"ber", "ve", "na"} & set(terms)


# Words of letters from any script (Latin with diacritics, Greek, Cyrillic, CJK, ...), 3+ characters.
letters = st.characters(categories=("Lu", "Ll", "Lo"))
words = st.text(letters, min_size=3, max_size=12)


@given(st.lists(words, min_size=1, max_size=6))
def test_the_english_word_pattern_reads_any_script_whole(sample):
    text = " ".join(sample) + ", 42 " + "; ".join(sample)
    assert WORD.findall(text) == sample + sample


def test_a_german_query_over_a_collection_declared_english_drops_german_stopwords_too():
    from hybridsearch.bm25.analyzer import Analyzers

    docs = [("Die Häuser über dem Fluss wurden überflutet, und die Keller standen unter Wasser, sagt sie auf", 9.0),
            ("Überflutete Keller: das Wasser stand in den Häusern und sie", 7.0)]
    english, german = Analyzers().language("en"), Analyzers().language("de")
    unfiltered = feedback_terms("Hochwasser Haus", docs, english, 8)
    assert {"die", "und"} & set(unfiltered)  # English stopwords alone let them through (the bug)
    terms = feedback_terms("Hochwasser Haus", docs, english, 8, german.stopwords)
    assert not {"die", "sie", "auf", "und", "dem", "den", "das", "unter"} & set(terms) and "keller" in terms
