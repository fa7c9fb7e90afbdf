"""Previews: stemmed highlights, the densest window, the complete flag, full text, counts, tags."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hybridsearch.bm25.analyzer import EnglishAnalyzer
from hybridsearch.gateway.query.previews import (
    source_span,
    _analysed,
    _candidates,
    result_counts,
    include_full_text,
    preview,
    query_terms,
    tag_distribution,
    term_spans,
)
from hybridsearch.v1 import common_pb2

ANALYZER = EnglishAnalyzer("porter", "en_plus")


def highlighted(p) -> list[str]:
    return [p.snippet[s:e] for s, e in p.highlights]


def test_short_text_is_complete_and_highlights_stemmed_forms():
    p = preview("ranking lists", "Reciprocal rank fusion ranks each list; the ranked lists merge.", ANALYZER)
    assert p.complete and p.snippet.startswith("Reciprocal")
    assert highlighted(p) == ["rank", "ranks", "list", "ranked", "lists"]
    assert p.marked.startswith("Reciprocal <mark>rank</mark> fusion <mark>ranks</mark> each <mark>list</mark>;")


@pytest.mark.parametrize("query, text", [
    ("Ranking LISTS", "RANKED lists, Ranks_of lists; re-ranking ranked-lists 2Rank rank2 LiStInG"),
    ("fusion 2x", "Fusion2 2x 2X fusion_x (FUSION) confusion fusions"),
    ("Häuser rank", "Häuser ranked HAUS"),  # not ASCII: the IGNORECASE path with its umlaut classes
])
def test_ascii_fast_path_highlights_what_ignorecase_does(query, text):
    terms = query_terms(query, ANALYZER)
    ignorecase = [m.span() for m in _candidates(terms).finditer(text) if _analysed(m.group(), ANALYZER) in terms]
    assert ignorecase  # the case is not empty
    assert term_spans(text, terms, ANALYZER) == ignorecase


WORDS = st.text(alphabet="abcdefghiklmnoprstuy_0123", min_size=1, max_size=9)


@settings(max_examples=300, deadline=None)
@given(st.lists(WORDS, min_size=1, max_size=4), st.lists(st.tuples(WORDS, st.sampled_from(" ,.-_'(")), max_size=40),
       st.booleans())
def test_ascii_word_starts_find_what_the_folded_candidates_find(query_words, text_words, upper):
    """The ASCII path's str.find of the candidates' prefixes at word starts (_word_starts) highlights exactly what
    the folded candidates' regex finds, punctuation, underscores and digits in and around the words."""
    terms = query_terms(" ".join(query_words), ANALYZER)
    text = "".join(w + sep for w, sep in text_words)
    text = text.upper() if upper else text
    regex = [m.span() for m in _candidates(terms, folded=True).finditer(text.lower())
             if _analysed(text[m.start():m.end()], ANALYZER) in terms] if terms else []
    assert term_spans(text, terms, ANALYZER) == regex


def test_stopwords_are_not_highlighted():
    p = preview("the fusion of lists", "The fusion of the lists.", ANALYZER)
    assert highlighted(p) == ["fusion", "lists"]


def test_long_text_gets_the_densest_window_cut_at_words():
    filler = "lorem ipsum dolor sit amet " * 40
    text = filler + "here vector search and vector indexes meet hybrid vector ranking " + filler
    p = preview("vector ranking", text, ANALYZER, width=120)
    assert not p.complete and p.snippet.startswith("…") and p.snippet.endswith("…")
    assert highlighted(p).count("vector") == 3 and "ranking" in highlighted(p)
    assert all(p.snippet[s - 1] in " …" for s, _ in p.highlights)  # whole words only
    assert len(p.snippet) <= 122


def test_no_match_starts_at_the_beginning():
    p = preview("zebra", "word " * 100, ANALYZER, width=50)
    assert p.snippet.startswith("word") and p.highlights == [] and not p.complete


@pytest.mark.parametrize("rank, score, reranked, chars, effort, expected", [
    (0, 0.9, True, 500, common_pb2.EFFORT_BALANCED, True),
    (2, 0.81, True, 2047, common_pb2.EFFORT_BALANCED, True),
    (3, 0.95, True, 100, common_pb2.EFFORT_BALANCED, False),   # top 3 standard
    (4, 0.95, True, 100, common_pb2.EFFORT_THOROUGH, True),    # top 5 deep
    (0, 0.80, True, 100, common_pb2.EFFORT_BALANCED, False),   # above 0.80, not at it
    (0, 0.99, True, 2048, common_pb2.EFFORT_BALANCED, False),  # under 2,048 characters
    (0, 0.99, False, 100, common_pb2.EFFORT_BALANCED, False),  # only what the reranker judged
])
def test_full_text_rule(rank, score, reranked, chars, effort, expected):
    assert include_full_text(rank, score, reranked, chars, effort) is expected


def test_counts_line_and_tags():
    assert result_counts(20, 143, 10).line == "Reranked 20 of 143, returned 10"
    # with a min_score the line says how many passed it: the reranked never outnumber the candidates
    cut = result_counts(10, 40, 1, min_score=0.5, above=1)
    assert cut.line == "Reranked 10 of 40, 1 at or above min_score 0.5, returned 1" and cut.above_min_score == 1
    assert tag_distribution(["search, fusion", "fusion", "", "rerank,fusion "]) == {"fusion": 3, "rerank": 1, "search": 1}


def _normalised_with_sources(text: str) -> tuple[str, list[int], list[int]]:
    """The oracle: the normalised text char by char, each char's source offset, and each word's source end."""
    out, where, ends = [], [], []
    for i, m in enumerate(re.finditer(r"\S+", text)):
        if i:
            out.append(" ")
            where.append(m.start() - 1)  # the one space stands for the run before this word
        out.extend(m.group())
        where.extend(range(m.start(), m.end()))
        ends.append(m.end())
    return "".join(out), where, ends


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(st.text(alphabet="abcé", min_size=1, max_size=6),
                          st.sampled_from([" ", "  ", "\n", " \n ", "\t", "\n\n", " \t  "])), min_size=1, max_size=12),
       st.sampled_from(["", " ", "\n  "]), st.data())
def test_a_window_of_the_normalised_text_maps_onto_the_same_words_of_the_source(words, lead, data):
    text = lead + "".join(w + gap for w, gap in words)
    normal, where, ends = _normalised_with_sources(text)
    assert normal == " ".join(text.split())
    starts = [0] + [i + 1 for i, c in enumerate(normal) if c == " "]  # windows begin at a word
    stops = [i for i, c in enumerate(normal) if c == " "] + [len(normal)]  # and end after one
    start = data.draw(st.sampled_from(starts))
    end = data.draw(st.sampled_from([e for e in stops if e > start]))
    got = source_span(text, start, end)
    assert got == (where[start], where[end - 1] + 1)
    assert " ".join(text[got[0]:got[1]].split()) == normal[start:end]


def test_a_text_of_single_spaces_maps_onto_itself():
    assert source_span("one two three", 4, 7) == (4, 7)
    assert source_span("  one\n\ntwo   three\n", 4, 13) == (7, 18)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["fusion", "ranked", "lists", "of", "the", "scores", "énorme", "a", "x" * 40]),
                min_size=1, max_size=120),
       st.sampled_from(["", "\n", "  ", "\t"]))
def test_a_text_as_given_cites_its_window_as_the_walk_over_its_words_does(words, gap):
    """A text whose whitespace needs no normalising has its window in its own offsets (show cites it without walking
    its words); one that needs it is walked (source_span)."""
    text = " ".join(words) + gap
    shown = preview("fusion of ranked lists", text, ANALYZER)
    assert shown.as_given == (gap == "")
    if shown.as_given:
        assert source_span(text, *shown.window) == shown.window
