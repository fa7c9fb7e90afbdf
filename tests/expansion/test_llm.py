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


@pytest.mark.parametrize("cut,lexical,semantic,hyde", [
    ('{"lexical": ["caffeine sleep", "coffee insomnia"], "semantic": ["How does coffee',
     ["caffeine sleep", "coffee insomnia"], ["How does coffee"], ""),
    ('{"lexical": ["caffeine sleep"], "semantic": ["Does coffee hurt sleep?"], "hyde": "Caffeine delays sl',
     ["caffeine sleep"], ["Does coffee hurt sleep?"], "Caffeine delays sl"),
    ('{"lexical": ["caffeine sleep", "adeno', ["caffeine sleep", "adeno"], [], ""),
    # Cut where a fixed list of closers could not close it (seen in CI: "cannot be closed", THOROUGH degraded).
    ('{"lexical": ["a b"], "semantic": ["Does coffee hurt sleep?", "Is caf', ["a b"],
     ["Does coffee hurt sleep?", "Is caf"], ""),
    ('{"lexical": ["a b"], "semantic":', ["a b"], [], ""),
    ('{"lexical": ["a b"], "semantic": [], "hy', ["a b"], [], ""),
    ('{"lexical": ["a b"],\n  "semantic": ["x"],\n  "hyde": "Die Ergebnisse werden zusammengef\\u00', ["a b"], ["x"],
     "Die Ergebnisse werden zusammengef"),
])
def test_an_answer_cut_short_is_closed_where_it_stopped(cut, lexical, semantic, hyde):
    out = parse_expansion(cut)
    assert (out.lexical, out.semantic, out.hyde) == (lexical, semantic, hyde)


@pytest.mark.parametrize("cut", ['{"lexical": [', '{"lex', '{"lexical": ["'])
def test_an_answer_cut_before_its_first_variant_is_an_error(cut):
    with pytest.raises(LlmError, match="cut short"):
        parse_expansion(cut)


def test_the_schema_bounds_every_string_so_the_object_fits_max_tokens():
    from hybridsearch.expansion.llm import RESPONSE_SCHEMA

    fields = RESPONSE_SCHEMA["properties"]
    worst = (fields["lexical"]["maxItems"] * fields["lexical"]["items"]["maxLength"]
             + fields["semantic"]["maxItems"] * fields["semantic"]["items"]["maxLength"] + fields["hyde"]["maxLength"])
    assert worst <= 1000  # characters: ~300 tokens at worst, under the request's max_tokens (320)
