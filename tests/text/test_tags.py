"""Tags as the tag leg matches them (text.tags)."""

from hybridsearch.text.tags import MAX_KEYWORDS, matched, query_keywords, split_tags


def test_split_tags_folds_case_trims_and_drops_empty_and_duplicate_tags():
    assert split_tags(" Postgres, rank  fusion,,postgres ,C++ ") == ["postgres", "rank fusion", "c++"]
    assert split_tags("") == []


def test_query_keywords_are_words_pairs_and_the_whole_query():
    keys = query_keywords("Rank fusion in Postgres?")
    assert keys[:4] == ["rank", "fusion", "in", "postgres"]
    assert {"rank fusion", "rank-fusion", "fusion in", "rank fusion in postgres"} <= set(keys)
    assert "c++" in query_keywords("tuning c++ builds") and "node.js" in query_keywords("node.js.")


def test_query_keywords_are_bounded():
    assert len(query_keywords(" ".join(f"w{i}" for i in range(500)))) == MAX_KEYWORDS
    assert query_keywords("  ") == []


def test_matched_counts_exact_tags_only():
    assert matched(["postgres", "indexing", "sql"], {"postgres", "index", "sql"}) == 2
