"""What a reader of a hit sees: a preview window with highlights, whether it is the complete text, the
full text of high-confidence hits, and the answer's counts line and tag distribution (Gnosis' previews).

Highlights match the query's analysed terms (the BM25 analyzer: lowercase, stopwords, Snowball stems), so
"ranking" in a query marks "ranked" and "ranks" in the text. Offsets are Python string indexes (code
points) into the preview's snippet, half-open [start, end). Pure functions, no I/O.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from hybridsearch.bm25.analyzer import EnglishAnalyzer
from hybridsearch.fusion.packed import FusedDoc
from hybridsearch.v1 import common_pb2, search_pb2

WORD = re.compile(r"\S+")
WORD_END = re.compile(r"\w*")  # from a word's start to its end

SNIPPET_CHARS = 300
UMLAUT = {"a": "[aä]", "o": "[oö]", "u": "[uü]"}
MARK = ("<mark>", "</mark>")
# Gnosis: the full text rides along for hits the reranker is sure of and that are short enough to read.
FULL_TEXT_MIN_RERANK = 0.80
FULL_TEXT_MAX_CHARS = 2048
FULL_TEXT_TOP = {common_pb2.EFFORT_FAST: 3, common_pb2.EFFORT_BALANCED: 3, common_pb2.EFFORT_THOROUGH: 5}


@dataclass(frozen=True)
class Preview:
    snippet: str
    highlights: list[tuple[int, int]] = field(default_factory=list)  # into snippet
    complete: bool = False  # the snippet is the whole text (nothing cut)
    window: tuple[int, int] = (0, 0)  # what the snippet shows of the text, whitespace normalised: [start, end)
    as_given: bool = False  # the text needed no normalising: `window` is in the text's own offsets too

    @property
    def marked(self) -> str:
        """The snippet with each highlight wrapped in <mark>…</mark>."""
        out, last = [], 0
        for start, end in self.highlights:
            out += [self.snippet[last:start], MARK[0], self.snippet[start:end], MARK[1]]
            last = end
        out.append(self.snippet[last:])
        return "".join(out)


@lru_cache(maxsize=1024)
def query_terms(query: str, analyzer: EnglishAnalyzer) -> frozenset[str]:
    """The query's analysed terms (once per answer, not once per hit: every hit of a page reads them)."""
    return frozenset(analyzer.analyze(query))


@lru_cache(maxsize=65536)
def _analysed(word: str, analyzer: EnglishAnalyzer) -> str:
    """A word's analysed form ('' for a stopword): pages repeat their words, so each is analysed once."""
    analysed = analyzer.analyze(word)
    return analysed[0] if analysed else ""


@lru_cache(maxsize=4096)
def _candidates(terms: frozenset[str], folded: bool = False) -> re.Pattern:
    """Words that may analyse to one of `terms`: stemmers change endings, not beginnings, so a word is a
    candidate when it starts with a term less its last letter (happi <- happy), the vowels also matching
    their umlauts (Snowball's German stemmer folds them: Häuser -> haus). `folded`: for an ASCII text
    already lowercased, the same words without IGNORECASE (which makes the regex engine try every
    alternative at every position: 2-3x slower over a page's texts)."""
    prefixes = sorted(_prefixes(terms), key=len, reverse=True)
    if folded:
        return re.compile(rf"\b(?:{'|'.join(re.escape(prefix.lower()) for prefix in prefixes)})\w*")
    alternatives = "|".join("".join(UMLAUT.get(c, re.escape(c)) for c in prefix) for prefix in prefixes)
    return re.compile(rf"\b(?:{alternatives})\w*", re.IGNORECASE)


@lru_cache(maxsize=4096)
def _ascii(terms: frozenset[str]) -> bool:
    return all(t.isascii() for t in terms)


def _prefixes(terms: frozenset[str]) -> set[str]:
    """What a word starts with to be a candidate for one of `terms` (`_candidates`): the term less its last letter."""
    return {t[:-1] if len(t) > 3 else t for t in terms}


@lru_cache(maxsize=4096)
def _word_prefixes(terms: frozenset[str]) -> tuple[str, ...] | None:
    """The candidates' prefixes when every one is ASCII word characters, lowercased; else None."""
    prefixes = _prefixes(terms)
    if all(p.isascii() and p.replace("_", "a").isalnum() for p in prefixes):
        return tuple(sorted(p.lower() for p in prefixes))
    return None


def _word_starts(folded: str, prefixes: tuple[str, ...]) -> list[int]:
    """Where a word of ASCII `folded` starts with one of `prefixes` (ASCII word characters): what the folded
    candidates' `\b(?:prefixes)` finds, by str.find, which scans a text for one prefix at C speed where the
    regex tries every alternative at every position (2x the time over a page's texts)."""
    starts = set()
    for prefix in prefixes:
        at = folded.find(prefix)
        while at >= 0:
            if at == 0 or not (folded[at - 1].isalnum() or folded[at - 1] == "_"):
                starts.add(at)
            at = folded.find(prefix, at + 1)
    return sorted(starts)


def term_spans(text: str, terms: frozenset[str], analyzer: EnglishAnalyzer) -> list[tuple[int, int]]:
    """Spans of the words of `text` whose analysed form is one of `terms`."""
    if not terms:
        return []
    if text.isascii() and _ascii(terms):  # ASCII both sides: IGNORECASE is exactly matching the lowercased text
        folded = text.lower()
        if (prefixes := _word_prefixes(terms)) is not None:  # each candidate: a word start, to the word's end
            spans = [(start, WORD_END.match(folded, start).end()) for start in _word_starts(folded, prefixes)]
            return [(a, b) for a, b in spans if _analysed(text[a:b], analyzer) in terms]
        return [m.span() for m in _candidates(terms, folded=True).finditer(folded)
                if _analysed(text[m.start():m.end()], analyzer) in terms]
    return [match.span() for match in _candidates(terms).finditer(text) if _analysed(match.group(), analyzer) in terms]


def _best_window(spans: list[tuple[int, int]], length: int, width: int) -> int:
    """Start of the `width`-character window holding the most highlighted words (earliest on ties)."""
    best_start, best_count, j = 0, 0, 0
    for i, (start, _) in enumerate(spans):
        while j < len(spans) and spans[j][1] <= start + width:
            j += 1
        if j - i > best_count:
            best_start, best_count = start, j - i
    # Some context before the first highlight, unless the window would run past the end anyway.
    return max(0, min(best_start - width // 5, length - width))


def preview(query: str, text: str, analyzer: EnglishAnalyzer, width: int = SNIPPET_CHARS) -> Preview:
    """The densest `width`-character window of `text` for the query, cut at word boundaries, highlighted."""
    normal = " ".join(text.split())
    as_given, text = normal == text, normal
    terms = query_terms(query, analyzer)
    spans = term_spans(text, terms, analyzer)
    if len(text) <= width:
        return Preview(text, spans, complete=True, window=(0, len(text)), as_given=as_given)
    start = _best_window(spans, len(text), width) if spans else 0
    if start:
        start = text.rfind(" ", 0, start) + 1
    end = start + width
    if end < len(text) and text[end] != " ":
        cut = text.rfind(" ", start, end)
        end = cut if cut > start else end
    body = text[start:end].rstrip()
    prefix = "…" if start else ""
    shift = len(prefix) - start
    inside = [(s + shift, e + shift) for s, e in spans if s >= start and e <= start + len(body)]
    return Preview(prefix + body + "…", inside, complete=False, window=(start, start + len(body)), as_given=as_given)


def source_span(text: str, start: int, end: int) -> tuple[int, int]:
    """[start, end) of `text` whitespace-normalised (words joined by one space) as offsets into `text` itself."""
    out_start = out_end = None
    at = 0  # where the word starts in the normalised text
    for m in WORD.finditer(text):
        length = m.end() - m.start()
        if out_start is None and at + length > start:
            out_start = m.start() + max(0, start - at)
        if at < end:
            out_end = m.start() + min(length, end - at)
        else:
            break
        at += length + 1
    return (out_start or 0, out_end if out_end is not None else 0)


def include_full_text(rank: int, rerank_score: float, reranked: bool, text_chars: int, effort: int) -> bool:
    """Whether the hit at 0-based `rank` carries its full text: reranked with confidence, short, near the top."""
    top = FULL_TEXT_TOP.get(effort, FULL_TEXT_TOP[common_pb2.EFFORT_BALANCED])
    return reranked and rerank_score > FULL_TEXT_MIN_RERANK and text_chars < FULL_TEXT_MAX_CHARS and rank < top


def describe(hit: search_pb2.SearchHit, chunk: common_pb2.LegHit | common_pb2.Chunk, fields: Iterable[str]) -> None:
    """The hit's own document's fields (the chunk's metadata: always the hit's own collection's)."""
    meta = chunk.metadata
    hit.metadata.update({f: meta[f] for f in fields if f in meta})
    hit.path, hit.type, hit.modified = meta.get("path", ""), meta.get("type", ""), meta.get("modified", "")


def result_counts(reranked: int, candidates: int, returned: int, min_score: float = 0.0,
                  above: int = 0) -> search_pb2.ResultCounts:
    """The answer's counts and their line; with a min_score (the score floor too), how many candidates it kept,
    said in the line when it dropped any."""
    kept = f", {above} at or above min_score {min_score:g}" if 0 < min_score and above < candidates else ""
    return search_pb2.ResultCounts(reranked=reranked, candidates=candidates, returned=returned,
                                   above_min_score=above if min_score > 0 else 0,
                                   line=f"Reranked {reranked} of {candidates}{kept}, returned {returned}")


def tag_distribution(tag_values: Iterable[str]) -> dict[str, int]:
    """How many hits carry each tag (comma-separated values, trimmed, case kept), most frequent first."""
    counts = Counter(t.strip() for value in tag_values for t in value.split(",") if t.strip())
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def show(hit: search_pb2.SearchHit, query: str, text: str, analyzer: EnglishAnalyzer, rank: int, effort: int,
         chunk: common_pb2.LegHit | common_pb2.Chunk | None = None, fields: Iterable[str] = ()) -> None:
    """Fills a hit's preview: snippet, highlights, marked snippet, complete flag, and the full text when
    the hit at 0-based `rank` qualifies (include_full_text); with the leg hit of its `chunk`, what it shows
    of its document (`fields` of its metadata, path, type, modified) and its citation."""
    shown = preview(query, text, analyzer)
    if chunk is not None:
        describe(hit, chunk, fields)
        if chunk.HasField("span"):
            hit.citation.chunk.CopyFrom(chunk.span)
            # the window in the text's own offsets (walking its words only where whitespace was normalised)
            start, end = shown.window if shown.as_given else source_span(text, *shown.window)
            hit.citation.snippet.start, hit.citation.snippet.end = start, end
    hit.snippet, hit.marked_snippet, hit.complete = shown.snippet, shown.marked, shown.complete
    hit.highlights.extend(search_pb2.Highlight(start=a, end=b) for a, b in shown.highlights)
    if include_full_text(rank, hit.rerank_score, hit.reranked, len(text), effort):
        hit.full_text = text


def search_hit(f: FusedDoc, collection: str, chunk_id: str, title: str, score: float, blended: float,
               rerank_score: float, reranked: bool) -> search_pb2.SearchHit:
    """A fused hit, in `collection` as `chunk_id` (its merged key split), as the answer shows it (without its
    preview): first pages and later ones alike."""
    return search_pb2.SearchHit(
        doc_id=f.doc_id, chunk_id=chunk_id, title=title, score=score, blended_score=blended,
        fusion_score=f.normalized_score, rerank_score=rerank_score, reranked=reranked, collection=collection,
        legs=[search_pb2.LegRank(leg=e.leg, kind=e.kind, rank=e.rank, score=e.score) for e in f.evidence],
    )


def show_page(hits: Sequence[search_pb2.SearchHit], sources: Sequence[common_pb2.LegHit | common_pb2.Chunk | None],
              query: str, analyzer: EnglishAnalyzer, offset: int, effort: int,
              shows: Mapping[str, tuple[Sequence[str], str]]) -> dict[str, int]:
    """Fills a page's previews (first pages and later ones alike), each hit's from its source: its leg hit, or its
    stored chunk (None: no store has it any more); what it shows of its document (`shows`: each collection's
    fields to show and its tags field); its title where it has none (a hit kept from below the legs' text depth).
    The page's tag distribution."""
    tags = []
    for rank, (hit, source) in enumerate(zip(hits, sources), start=offset):
        fields, tags_field = shows[hit.collection]
        if source is not None and not hit.title:
            hit.title = source.title
        show(hit, query, source.text if source is not None else "", analyzer, rank, effort, source, fields)
        tags.append(source.metadata.get(tags_field, "") if source is not None else "")
    return tag_distribution(tags)
