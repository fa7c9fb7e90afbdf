"""Tags, as the tag leg matches them: exact, case-folded strings, not analysed text.

A document's tags are one metadata value, comma-separated (`CollectionConfig.tags_field`); a query's
keywords are its words, plus its hyphenated and two-word phrases (a tag "rank-fusion" or "rank fusion"
is found by the query "rank fusion"). A hit's score is how many of its tags the query named.
"""

from __future__ import annotations

import re

WORD = re.compile(r"[\w][\w.+#-]*")
MAX_TAG_CHARS = 128
MAX_KEYWORDS = 64


def split_tags(value: str) -> list[str]:
    """A metadata value's tags: split at commas, trimmed, case-folded, empty ones and duplicates dropped."""
    out: list[str] = []
    for tag in value.split(","):
        tag = " ".join(tag.split()).casefold()[:MAX_TAG_CHARS]
        if tag and tag not in out:
            out.append(tag)
    return out


def query_keywords(text: str) -> list[str]:
    """The tags a query can match: its words, its adjacent pairs (joined by a space and by a hyphen)
    and the whole query; at most MAX_KEYWORDS, in that order."""
    words = [w.strip(".-") for w in WORD.findall(text.casefold())]
    words = [w for w in words if w]
    keys = list(words)
    for a, b in zip(words, words[1:]):
        keys += [f"{a} {b}", f"{a}-{b}"]
    whole = " ".join(words)
    keys.append(whole)
    seen: dict[str, None] = {}
    for key in keys:
        if key and len(key) <= MAX_TAG_CHARS:
            seen.setdefault(key, None)
    return list(seen)[:MAX_KEYWORDS]


def matched(tags: list[str], keywords: set[str]) -> int:
    """How many of a document's tags the query named."""
    return sum(1 for tag in tags if tag in keywords)
