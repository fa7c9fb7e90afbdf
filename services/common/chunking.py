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


@dataclass
class ChunkPiece:
    position: int
    heading: str
    text: str


@dataclass
class Section:
    heading: str
    paragraphs: list[str] = field(default_factory=list)


def content_hash(title: str, text: str, metadata: dict[str, str]) -> str:
    """Hash of everything that is indexed: same hash, nothing to rewrite."""
    h = hashlib.sha256()
    for part in (title, text, *(f"{k}={metadata[k]}" for k in sorted(metadata))):
        h.update(part.encode("utf-8"))
        h.update(b"\x00")
    return h.hexdigest()[:32]


def _sections(text: str) -> list[Section]:
    path: list[tuple[int, str]] = []
    sections = [Section(heading="")]
    paragraph: list[str] = []
    in_fence = False

    def flush() -> None:
        if paragraph:
            sections[-1].paragraphs.append("\n".join(paragraph).strip())
            paragraph.clear()

    for line in text.splitlines():
        if FENCE.match(line):
            in_fence = not in_fence
            paragraph.append(line)
            continue
        m = None if in_fence else HEADING.match(line)
        if m:
            flush()
            level = len(m.group(1))
            path = [(lvl, t) for lvl, t in path if lvl < level] + [(level, m.group(2).strip())]
            sections.append(Section(heading=" > ".join(t for _, t in path)))
        elif not line.strip() and not in_fence:
            flush()
        else:
            paragraph.append(line)
    flush()
    return [s for s in sections if s.paragraphs]


def _split_long(paragraph: str, max_words: int) -> list[str]:
    """A paragraph over budget is cut at sentence ends, then at word boundaries."""
    pieces: list[str] = []
    current: list[str] = []
    for sentence in SENTENCE_END.split(paragraph):
        words = sentence.split()
        while len(words) > max_words:
            if current:
                pieces.append(" ".join(current))
                current = []
            pieces.append(" ".join(words[:max_words]))
            words = words[max_words:]
        if len(current) + len(words) > max_words and current:
            pieces.append(" ".join(current))
            current = []
        current.extend(words)
    if current:
        pieces.append(" ".join(current))
    return pieces


def chunk_text(text: str, max_words: int = 400, overlap_words: int = 40) -> list[ChunkPiece]:
    """Chunks of at most ~max_words words; a text under budget stays one chunk."""
    if max_words < 1:
        raise ValueError("max_words must be positive")
    sections = _sections(text)
    if len(sections) <= 1 and len(text.split()) <= max_words:
        return [ChunkPiece(position=0, heading=sections[0].heading if sections else "", text=text.strip())]
    chunks: list[ChunkPiece] = []
    for section in sections:
        buffer: list[str] = []
        count = 0
        for para in section.paragraphs:
            for piece in _split_long(para, max_words) if len(para.split()) > max_words else [para]:
                n = len(piece.split())
                if count + n > max_words and buffer:
                    chunks.append(ChunkPiece(len(chunks), section.heading, "\n\n".join(buffer)))
                    tail = " ".join(" ".join(buffer).split()[-overlap_words:]) if overlap_words else ""
                    buffer, count = ([tail] if tail else []), len(tail.split())
                buffer.append(piece)
                count += n
        if buffer:
            chunks.append(ChunkPiece(len(chunks), section.heading, "\n\n".join(buffer)))
    if not chunks:
        chunks.append(ChunkPiece(0, "", text.strip()))
    return chunks


def indexed_text(title: str, heading: str, text: str) -> str:
    """What both legs index for a chunk: title, heading path, body."""
    return " ".join(part for part in (title, heading, text) if part)
