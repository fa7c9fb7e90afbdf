"""What restricts a tantivy search, as tantivy queries: metadata filters and readers (security/acl.py) as clauses
of the scoring query (before ranking: the top-k holds only what passes), and fuzzy.py's term look-ups within them.

Metadata and readers are `meta` terms, one each: `key=value` for a metadata field, `@allow=<term>` and
`@deny=<principal>` for readers, and MARKER on every chunk written with readers (one without it was written before:
its readers are the collection default's)."""

from __future__ import annotations

import math
from collections.abc import Callable

import tantivy

from hybridsearch.bm25.analyzer import Analyzer
from hybridsearch.security.acl import ALLOW_KEY, DENY_KEY, MARKER, allow_terms, deny_terms, refused, wanted
from hybridsearch.v1 import common_pb2

Clauses = list[tuple[tantivy.Occur, tantivy.Query]]


def meta_term(key: str, value: str) -> str:
    return f"{key}={value}"


def reader_terms(acl: common_pb2.Acl) -> list[str]:
    """The `meta` terms of a chunk's readers: its allow and deny terms, and MARKER."""
    return [*(meta_term(ALLOW_KEY, t) for t in allow_terms(acl)), *(meta_term(DENY_KEY, p) for p in deny_terms(acl)),
            MARKER]


def term(schema: tantivy.Schema, field: str, value) -> tantivy.Query:
    return tantivy.Query.term_query(schema, field, value, index_option="basic")


def term_freq(schema: tantivy.Schema, field: str, value: str) -> tantivy.Query:
    return tantivy.Query.term_query(schema, field, value, index_option="freq")


def any_term(schema: tantivy.Schema, values: list[str]) -> tantivy.Query:
    """A `meta` term among `values`: term queries under one boolean, not a term_set_query. Measured on SciFact, a
    count of one word within a reader's documents cost 0.27 ms with term sets, 0.02 ms so (tantivy 0.27's term set
    query builds its whole document set)."""
    return tantivy.Query.boolean_query([(tantivy.Occur.Should, term(schema, "meta", v)) for v in values])


def _unscored(query: tantivy.Query) -> tuple[tantivy.Occur, tantivy.Query]:
    return tantivy.Occur.Must, tantivy.Query.const_score_query(query, 0.0)


def filter_clauses(schema: tantivy.Schema, filters) -> Clauses:
    """The request's metadata filters (validation.matches_filters' semantics)."""
    clauses = []
    for f in filters:
        which = f.WhichOneof("condition")
        if which == "equals":
            clauses.append(_unscored(term(schema, "meta", meta_term(f.field, f.equals))))
        elif which == "any_of":
            clauses.append(_unscored(any_term(schema, [meta_term(f.field, v) for v in f.any_of.values])))
        elif which == "not_equals":
            clauses.append((tantivy.Occur.MustNot, term(schema, "meta", meta_term(f.field, f.not_equals))))
    return clauses


def reader_clauses(schema: tantivy.Schema, readers: common_pb2.Readers | None, unmarked: bool = True) -> Clauses:
    """What `readers` may read: one of their allow terms (or no MARKER, when the collection's default readers admit
    them and the index holds `unmarked` chunks, written before readers: a scan of every chunk, left out when there
    are none) and none of their deny terms; none for no restriction."""
    if readers is None:
        return []
    may = any_term(schema, [meta_term(ALLOW_KEY, t) for t in wanted(readers)])
    if readers.default_readable and unmarked:
        unmarked = tantivy.Query.boolean_query([(tantivy.Occur.Must, tantivy.Query.all_query()),
                                                (tantivy.Occur.MustNot, term(schema, "meta", MARKER))])
        may = tantivy.Query.boolean_query([(tantivy.Occur.Should, may), (tantivy.Occur.Should, unmarked)])
    return [_unscored(may), *((tantivy.Occur.MustNot, term(schema, "meta", meta_term(DENY_KEY, p)))
                              for p in refused(readers))]


def unmarked_chunks(schema: tantivy.Schema, searcher: tantivy.Searcher) -> bool:
    """Whether the searcher's index holds chunks written before readers were kept (no MARKER)."""
    return searcher.num_docs > 0 and searcher.search(term(schema, "meta", MARKER), 1, count=True).count < searcher.num_docs


def bm25_idf(docs: int, df: int) -> float:
    """Lucene's (and tantivy's) BM25 IDF of a term in `df` of `docs` documents."""
    return math.log(1 + (docs - df + 0.5) / (df + 0.5))


KNOWN_COUNTS = 65_536  # readable document frequencies kept per reader of an index (readers_idf's `known`)


def count_within(searcher: tantivy.Searcher, query: tantivy.Query, restrict: Clauses = ()) -> int:
    """How many chunks `query` matches among those the clauses `restrict` let through (every chunk: none)."""
    if restrict:
        query = tantivy.Query.boolean_query([(tantivy.Occur.Must, query), *restrict])
    return searcher.search(query, 1, count=True).count


def kept_count(searcher: tantivy.Searcher, restrict: Clauses, known: dict, who: str
               ) -> Callable[[tuple, tantivy.Query], int]:
    """count_within under a reader's clauses, each count kept in `known` under (who, *key) (one searcher's)."""
    def count(key: tuple, query: tantivy.Query) -> int:
        if (found := known.get((who, *key))) is None:
            if len(known) >= KNOWN_COUNTS:
                known.clear()
            found = known[(who, *key)] = count_within(searcher, query, restrict)
        return found
    return count


def readers_idf(schema: tantivy.Schema, searcher: tantivy.Searcher,
                count: Callable[[tuple, tantivy.Query], int]) -> Callable[[str, str], float]:
    """(field, term) -> the boost that turns tantivy's IDF of the term, counted over every chunk, into its IDF over
    the chunks the reader's clauses let through: the ranking the reader would get from a collection of only what it
    reads, but for the average field length, which stays the whole collection's. 1 for a term no readable chunk
    holds (it scores nothing here anyway). `count`: the reader's kept counts under its clauses (kept_count: one
    searcher's, each counted once per reader)."""
    docs = searcher.num_docs
    within = count((), tantivy.Query.all_query())

    def boost(field: str, t: str) -> float:
        df = searcher.doc_freq(field, t)
        readable = count((field, t), term_freq(schema, field, t)) if df else 0
        return bm25_idf(within, readable) / bm25_idf(docs, df) if readable else 1.0
    return boost


def lookups(schema: tantivy.Schema, searcher: tantivy.Searcher, analyzer: Analyzer, restrict: Clauses = (),
            kept: Callable[[tuple, tantivy.Query], int] | None = None) -> tuple:
    """fuzzy.py's look-ups on the body field: the analyzer, doc_freq, with_prefix. Under `restrict` (a reader's
    clauses, perhaps a search's filters too) a term's frequency is that among the documents it lets through, so no
    correction or expansion names a word only documents the reader may not read hold. `kept`: the reader's kept
    counts (kept_count), where `restrict` is its clauses alone: a word counted once for the reader's IDF
    (readers_idf) and its corrections alike."""
    if not restrict:
        return (analyzer.analyze_query, lambda t: searcher.doc_freq("body", t),
                lambda prefix, n: searcher.terms_with_prefix("body", prefix, limit=n))

    def doc_freq(t: str) -> int:
        if not searcher.doc_freq("body", t):
            return 0
        query = term_freq(schema, "body", t)
        return kept(("body", t), query) if kept is not None else count_within(searcher, query, restrict)

    def with_prefix(prefix: str, n: int) -> list[tuple[str, int]]:
        found = [(t, doc_freq(t)) for t, _ in searcher.terms_with_prefix("body", prefix, limit=4 * n)]
        return sorted(((t, df) for t, df in found if df), key=lambda td: -td[1])[:n]
    return analyzer.analyze_query, doc_freq, with_prefix
