"""Markdown-aware chunking: split on headings, pack paragraphs up to a word budget.

Each chunk keeps the heading path it sits under ("Install > Linux"), which both legs index with
the chunk, so a chunk deep in a section still matches the section's topic.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field

HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
FENCE = re.compile(r"^\s*(```|~~~)")
SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
WORD = re.compile(r"\S+")


@dataclass
class ChunkPiece:
    position: int
    heading: str
    text: str
    # Where the piece lies in the text it was cut from: code points [start, end). The piece's text is that
    # stretch with the whitespace between its paragraphs (or its words, when a long one was cut) normalised.
    start: int = 0
    end: int = 0


@dataclass(frozen=True)
class Span:
    """Some text and where it lies in its source: [start, end)."""

    text: str
    start: int
    end: int


@dataclass
class Section:
    heading: str
    paragraphs: list[Span] = field(default_factory=list)


def content_hash(title: str, text: str, metadata: dict[str, str], *extra: str) -> str:
    """Hash of everything that is indexed: same hash, nothing to rewrite (`extra`: a reader's sections)."""
    h = hashlib.sha256()
    for part in (title, text, *(f"{k}={metadata[k]}" for k in sorted(metadata)), *extra):
        h.update(part.encode("utf-8"))
        h.update(b"\x00")
    return h.hexdigest()[:32]


def _stripped(text: str, start: int, end: int) -> Span:
    """text[start:end] without its surrounding whitespace, and where that lies."""
    body = text[start:end]
    lead = len(body) - len(body.lstrip())
    return Span(body.strip(), start + lead, start + lead + len(body.strip()))


def _sections(text: str) -> list[Section]:
    path: list[tuple[int, str]] = []
    sections = [Section(heading="")]
    first = last = -1  # the open paragraph's first line start and last line end
    in_fence = False

    def flush() -> None:
        nonlocal first
        if first >= 0:
            sections[-1].paragraphs.append(_stripped(text, first, last))
            first = -1

    offset = 0
    for line in text.splitlines(keepends=True):
        line_start, offset = offset, offset + len(line)
        line_end = line_start + len(line.rstrip("\r\n"))
        line = line.rstrip("\r\n")
        if FENCE.match(line):
            in_fence = not in_fence
        else:
            m = None if in_fence else HEADING.match(line)
            if m:
                flush()
                level = len(m.group(1))
                path = [(lvl, t) for lvl, t in path if lvl < level] + [(level, m.group(2).strip())]
                sections.append(Section(heading=" > ".join(t for _, t in path)))
                continue
            if not line.strip() and not in_fence:
                flush()
                continue
        if first < 0:
            first = line_start
        last = line_end
    flush()
    return [s for s in sections if s.paragraphs and any(p.text for p in s.paragraphs)]


def _words(text: str, span: Span) -> list[tuple[int, int]]:
    """Where each word of a span's text lies in the source (its words are the source's, in order)."""
    return [(m.start(), m.end()) for m in WORD.finditer(text, span.start, span.end)]


def _run(text: str, spans: list[tuple[int, int]]) -> Span:
    """The words at these source spans, joined by single spaces."""
    return Span(" ".join(text[a:b] for a, b in spans), spans[0][0], spans[-1][1])


def _split_long(text: str, paragraph: Span, max_words: int) -> list[Span]:
    """A paragraph over budget is cut at sentence ends, then at word boundaries."""
    words = _words(text, paragraph)
    pieces: list[Span] = []
    current: list[tuple[int, int]] = []
    taken = 0
    for sentence in SENTENCE_END.split(paragraph.text):
        n = len(sentence.split())
        sentence_words, taken = words[taken:taken + n], taken + n
        while len(sentence_words) > max_words:
            if current:
                pieces.append(_run(text, current))
                current = []
            pieces.append(_run(text, sentence_words[:max_words]))
            sentence_words = sentence_words[max_words:]
        if len(current) + len(sentence_words) > max_words and current:
            pieces.append(_run(text, current))
            current = []
        current.extend(sentence_words)
    if current:
        pieces.append(_run(text, current))
    return pieces


def chunk_text(text: str, max_words: int = 400, overlap_words: int = 40) -> list[ChunkPiece]:
    """Chunks of at most ~max_words words; a text under budget stays one chunk. Each knows its span in `text`."""
    if max_words < 1:
        raise ValueError("max_words must be positive")
    sections = _sections(text)
    whole = _stripped(text, 0, len(text))
    if len(sections) <= 1 and len(text.split()) <= max_words:
        return [ChunkPiece(0, sections[0].heading if sections else "", whole.text, whole.start, whole.end)]
    chunks: list[ChunkPiece] = []
    for section in sections:
        buffer: list[Span] = []
        count = 0
        for para in section.paragraphs:
            for piece in _split_long(text, para, max_words) if len(para.text.split()) > max_words else [para]:
                n = len(piece.text.split())
                if count + n > max_words and buffer:
                    chunks.append(_packed(len(chunks), section.heading, buffer))
                    words = [w for span in buffer for w in _words(text, span)][-overlap_words:] if overlap_words else []
                    buffer, count = ([_run(text, words)] if words else []), len(words)
                buffer.append(piece)
                count += n
        if buffer:
            chunks.append(_packed(len(chunks), section.heading, buffer))
    if not chunks:
        chunks.append(ChunkPiece(0, "", whole.text, whole.start, whole.end))
    return chunks


def _packed(position: int, heading: str, buffer: list[Span]) -> ChunkPiece:
    return ChunkPiece(position, heading, "\n\n".join(s.text for s in buffer), buffer[0].start, buffer[-1].end)


def chunk_lines(text: str, start: int, end: int, max_words: int) -> list[Span]:
    """text[start:end] (a source file's function, say) as stretches of whole lines of at most ~max_words
    words each, verbatim: code keeps its line breaks and indentation, and is never cut inside a line."""
    whole = _stripped(text, start, end)
    if len(whole.text.split()) <= max_words:
        return [whole] if whole.text else []
    pieces: list[Span] = []
    first, count, offset = -1, 0, whole.start
    for line in text[whole.start:whole.end].splitlines(keepends=True):
        line_start, offset = offset, offset + len(line)
        n = len(line.split())
        if count + n > max_words and first >= 0:
            pieces.append(_stripped(text, first, line_start))
            first, count = -1, 0
        if first < 0 and n:
            first = line_start
        count += n
    if first >= 0:
        pieces.append(_stripped(text, first, whole.end))
    return [p for p in pieces if p.text]


def indexed_text(title: str, heading: str, text: str) -> str:
    """What both legs index for a chunk: title, heading path, body."""
    return " ".join(part for part in (title, heading, text) if part)
