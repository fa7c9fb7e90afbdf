"""Strong signals: queries that already say exactly what they want are not expanded."""

from __future__ import annotations

import re

QUOTED = re.compile(r"\"[^\"]+\"|“[^”]+”")
IDENTIFIER = re.compile(
    r"""(?x)
    \b[a-z]+[A-Z][A-Za-z0-9]*\b          # camelCase
  | \b[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]+)+\b  # PascalCase: two capitalised words at least (not "The", nor "HyDE")
  | \b[A-Za-z0-9]+_[A-Za-z0-9_]+\b       # snake_case, SCREAMING_CASE
  | \b[A-Za-z_][\w]*\(\)                 # call()
  | \b\w+(?:\.\w+){2,}\b                 # dotted.module.path
  | (?:^|\s)[\w.-]*/[\w./-]+             # a/path
  | \b[A-Z]{2,}-?\d{3,}\b                # ERR404, CVE-2024 style codes
  | \b0x[0-9a-fA-F]+\b                   # hex literal
    """
)


def strong_signal(query: str) -> str | None:
    """Why the query should not be expanded, or None."""
    if QUOTED.search(query):
        return "quoted phrase"
    if IDENTIFIER.search(query):
        return "identifier-like token"
    return None


def dominant_top_hit(scores: list[float], ratio: float, min_score: float) -> bool:
    """The first BM25 hit is far ahead of the second: the lexical answer is already clear."""
    if not scores or scores[0] < min_score:
        return False
    return len(scores) == 1 or scores[0] >= ratio * max(scores[1], 1e-9)
