import pytest

from hybridsearch.expansion.llm import LlmError, parse_expansion


def test_parses_json_inside_chatter_and_cleans_values():
    out = parse_expansion('Sure! {"lexical": ["a  b", "a b", ""], "semantic": ["x"], "hyde": "passage"} done')
    assert out.lexical == ["a b"]
    assert out.semantic == ["x"]
    assert out.hyde == "passage"


@pytest.mark.parametrize("content", ["no json here", '{"lexical": "not a list"}', '{"lexical": [1,2,3,4,5,6]}', "{broken"])
def test_rejects_invalid_answers(content):
    with pytest.raises(LlmError):
        parse_expansion(content)


def test_the_prompt_carries_a_capped_query():
    from hybridsearch.expansion.llm import MAX_PROMPT_QUERY_CHARS, capped

    long = "word " * 1000
    assert len(capped(long)) <= MAX_PROMPT_QUERY_CHARS and capped(long).endswith("word")
    assert capped("  short   query ") == "short query"


def test_the_prompt_follows_the_query_language():
    from hybridsearch.expansion.llm import SYSTEM_PROMPT, prompt_for

    english, german, french = (prompt_for(code).messages("q") for code in ("en", "de", "fr"))
    assert english[0]["content"] == SYSTEM_PROMPT and english[-1]["content"] == "Query: q"
    assert "Schreibe alles auf Deutsch" in german[0]["content"] and german[-1]["content"] == "Anfrage: q"
    assert "Koffein" in german[2]["content"]  # a German worked example, not the English one
    # The multilingual fallback: English instructions that ask for the query's own language.
    assert french[0]["content"].startswith(SYSTEM_PROMPT) and "in French, never translated" in french[0]["content"]
    assert "language" in prompt_for("xx").system
