"""Links read at ingest: Markdown links resolved like a browser, wiki links as page keys, metadata ids."""

from __future__ import annotations

import pytest

from hybridsearch.text.links import MAX_LINKS, extract_links, link_key, page_keys, resolve


@pytest.mark.parametrize("doc_id, target, expected", [
    ("notes/a.md", "b.md", "notes/b.md"),
    ("notes/a.md", "../guide/setup.md#install", "guide/setup.md"),
    ("notes/a.md", "./c.md?x=1", "notes/c.md"),
    ("notes/a.md", "/guide/setup.md", "guide/setup.md"),
    ("a.md", "../outside.md", None),
    ("a.md", "https://example.org/x.md", None),
    ("a.md", "mailto:someone@example.org", None),
    ("a.md", "#section", None),
    ("a.md", "//cdn.example.org/x", None),
])
def test_markdown_targets_resolve_against_the_documents_folder(doc_id, target, expected):
    assert resolve(doc_id, target) == expected


def test_extract_links_reads_all_three_sources_and_deduplicates():
    text = ("See [setup](../guide/setup.md) and [again](../guide/setup.md#x), [[Rank Fusion]] and "
            "[[rank_fusion|alias]], an image ![diagram](img.md) and [the web](https://example.org).\n"
            "Self: [[a]] [me](a.md)")
    links = extract_links("notes/a.md", text, {"links": "ids/one, ids/two,"})
    assert links.explicit == ("ids/one", "ids/two", "guide/setup.md")
    assert links.wiki == ("rank-fusion",)  # images are not links; the page itself is not its own neighbour


def test_links_are_bounded():
    text = " ".join(f"[x](d{i}.md)" for i in range(MAX_LINKS + 10)) + " [[extra]]"
    links = extract_links("a.md", text, {})
    assert len(links.explicit) == MAX_LINKS and links.wiki == ()


def test_page_keys_and_link_keys_meet():
    assert link_key("Guides/Setup_Guide.md") == link_key("setup guide") == "setup-guide"
    assert page_keys("guides/setup_guide.md", "The Setup Guide") == ("setup-guide", "the-setup-guide")
    assert page_keys("x.md", "") == ("x",)
