from hybridsearch.common.chunking import chunk_text, content_hash, indexed_text


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
