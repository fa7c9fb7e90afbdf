from hybridsearch.text.chunking import chunk_text, content_hash, indexed_text


def test_short_plain_text_is_one_chunk():
    chunks = chunk_text("A short abstract about proteins.", max_words=50)
    assert len(chunks) == 1
    assert chunks[0].text == "A short abstract about proteins." and chunks[0].heading == ""


def test_markdown_sections_keep_heading_path():
    text = "# Guide\nintro words\n\n## Install\nrun the installer\n\n### Linux\nuse apt\n\n## Usage\ncall it"
    chunks = chunk_text(text, max_words=50)
    headings = [c.heading for c in chunks]
    assert headings == ["Guide", "Guide > Install", "Guide > Install > Linux", "Guide > Usage"]
    assert chunks[2].text == "use apt"
    assert [c.position for c in chunks] == [0, 1, 2, 3]


def test_headings_inside_code_fences_are_text():
    text = "# Doc\n```\n# not a heading\n```\nafter"
    chunks = chunk_text(text, max_words=50)
    assert [c.heading for c in chunks] == ["Doc"]
    assert "# not a heading" in chunks[0].text


def test_long_text_is_split_within_budget_with_overlap():
    words = [f"w{i}" for i in range(1000)]
    chunks = chunk_text(" ".join(words), max_words=100, overlap_words=10)
    assert len(chunks) >= 10
    assert all(len(c.text.split()) <= 110 for c in chunks)
    assert chunks[1].text.split()[0] == chunks[0].text.split()[-10]  # overlap carries context
    assert set(" ".join(c.text for c in chunks).split()) == set(words)


def test_content_hash_changes_with_any_indexed_field():
    base = content_hash("t", "body", {"a": "1"})
    assert base == content_hash("t", "body", {"a": "1"})
    assert base != content_hash("t2", "body", {"a": "1"})
    assert base != content_hash("t", "body!", {"a": "1"})
    assert base != content_hash("t", "body", {"a": "2"})


def test_indexed_text_joins_non_empty_parts():
    assert indexed_text("Title", "", "body") == "Title body"


def test_each_chunk_knows_its_span_in_the_source():
    """A chunk's span covers the source it was cut from: its words, in order, and nothing before the heading."""
    text = ("---\n\n# Intro\n\n" + "Alpha beta gamma. " * 30 + "\n\n\n## Usage\n\n   indented line one\n"
            "line two\n\n" + " ".join(f"w{i}" for i in range(120)) + "\n")
    chunks = chunk_text(text, max_words=50, overlap_words=10)
    assert len(chunks) > 3
    for c in chunks:
        assert text[c.start:c.end].split() == c.text.split()
        assert text[c.start] != " " and text[c.end - 1] != " "
    usage = next(c for c in chunks if c.heading == "Intro > Usage")
    assert text[usage.start:].startswith("indented line one")


def test_chunk_lines_keeps_code_verbatim_and_cuts_at_line_ends():
    from hybridsearch.text.chunking import chunk_lines

    code = "def f():\n" + "".join(f"    x{i} = {i}  # step {i}\n" for i in range(40))
    whole = chunk_lines(code, 0, len(code), max_words=1000)
    assert [p.text for p in whole] == [code.strip()]
    pieces = chunk_lines(code, 0, len(code), max_words=30)
    assert len(pieces) > 3
    assert all(code[p.start:p.end] == p.text for p in pieces)
    assert all(p.text.endswith(tuple("0123456789")) for p in pieces)  # never cut inside a line
    assert "".join(code[p.start:p.end] + "\n" for p in pieces).split() == code.split()
