"""A seeded typo generator for measuring typo tolerance (docs/quality.md, "Typo tolerance").

Each query gets the typos a hurried typist makes, one edit per word hit:
  - substitution: a letter replaced by a neighbouring key on a QWERTY keyboard ("search" -> "seaech"),
  - deletion: a letter dropped ("search" -> "serch"),
  - transposition: two adjacent letters swapped ("search" -> "saerch").
Only words of at least MIN_WORD_CHARS letters are touched (short words are mostly stopwords, and a
typo in a 3-letter word is a different word). Each such word is hit with probability `rate`, and every
query with such a word gets at least one typo, so every typo'd query differs from its clean form.

Deterministic: the same (seed, query id, text) always gives the same typo'd text, on any machine and
in any order (a random.Random per query, seeded with the seed and the query id).
"""

from __future__ import annotations

import random
import re

MIN_WORD_CHARS = 4
DEFAULT_RATE = 0.3
ROWS = ("qwertyuiop", "asdfghjkl", "zxcvbnm")
WORD = re.compile(r"[A-Za-z]+")


def _neighbours() -> dict[str, str]:
    """The keys next to each letter on its row and the rows above and below (offset by at most one)."""
    where = {key: (r, c) for r, row in enumerate(ROWS) for c, key in enumerate(row)}
    out = {}
    for key, (r, c) in where.items():
        near = [k for k, (r2, c2) in where.items() if k != key and abs(r2 - r) <= 1 and abs(c2 - c) <= 1]
        out[key] = "".join(sorted(near))
    return out


NEIGHBOURS = _neighbours()


def substitute(word: str, rng: random.Random) -> str:
    i = rng.randrange(len(word))
    lower = word[i].lower()
    key = rng.choice(NEIGHBOURS[lower])
    return word[:i] + (key.upper() if word[i].isupper() else key) + word[i + 1:]


def delete(word: str, rng: random.Random) -> str:
    i = rng.randrange(len(word))
    return word[:i] + word[i + 1:]


def transpose(word: str, rng: random.Random) -> str:
    candidates = [i for i in range(len(word) - 1) if word[i].lower() != word[i + 1].lower()]
    if not candidates:
        return substitute(word, rng)  # "aaaa": a swap would change nothing
    i = rng.choice(candidates)
    return word[:i] + word[i + 1] + word[i] + word[i + 2:]


EDITS = (substitute, delete, transpose)


def typo_word(word: str, rng: random.Random) -> str:
    return rng.choice(EDITS)(word, rng)


def typo_query(text: str, rng: random.Random, rate: float = DEFAULT_RATE) -> str:
    """`text` with one edit in each eligible word hit (probability `rate`, at least one hit)."""
    spans = [m.span() for m in WORD.finditer(text) if m.end() - m.start() >= MIN_WORD_CHARS]
    if not spans:
        return text
    hit = {i for i in range(len(spans)) if rng.random() < rate} or {rng.randrange(len(spans))}
    out, last = [], 0
    for i, (start, end) in enumerate(spans):
        out.append(text[last:start])
        out.append(typo_word(text[start:end], rng) if i in hit else text[start:end])
        last = end
    out.append(text[last:])
    return "".join(out)


def typo_queries(queries: dict[str, str], seed: int, rate: float = DEFAULT_RATE) -> dict[str, str]:
    """Every query typo'd, each with its own generator seeded by (seed, query id)."""
    return {qid: typo_query(text, random.Random(f"{seed}:{qid}"), rate) for qid, text in queries.items()}
