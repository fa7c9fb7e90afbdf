"""Hashed terms: a sealed collection whose BM25 index holds keyed hashes of its terms, never its words
(`sealed: true` with `sealed_terms: hashed`; docs/security.md, "Sealed at rest").

The store cannot hash (it holds no key), so whoever does runs the analysis: the collection's own analysis
objects (bm25/analyzer.py: the tokenizer, lowercasing, possessives, stopwords and stemmer of its language,
the very ones the store would run), each term then replaced by its keyed hash
`CollectionSeal.digest("term", term)` cut to TERM_HEX hex characters, in order, joined by spaces. The store
indexes that text as it comes (analyzer.HashedTermsAnalyzer: no stopwords, no stemming), so every term's
document frequency, every field's length and the order of the terms are the clear mode's: BM25 ranks the
same documents the same way, under other names.

Width: 64 bits (16 hex characters). A term hash only has to tell the terms of one collection's vocabulary
apart: with ten million distinct terms the chance that any two share a hash is about 3 in a million
(n^2 / 2^65), and a 16-byte term keeps the term dictionary near the size of a clear one (SciFact's stems
average 7 characters). The HMAC is what is secret: a shorter cut of it tells nothing more about the word.

Queries are analyzed the same way (an `auto` collection's in every language) and each term is sent as its
hash under every key the collection holds (`CollectionSeal.digests`, the active key's first): during a key
rotation records hashed under the old key and the new coexist, and a record matches the hash of its own
key. With one key the query's terms are exactly the clear query's. Typo and prefix matching need the words
(a hash has no neighbours): they are off for such a collection (gateway/query/sealed.py says so in a notice).
"""

from __future__ import annotations

from functools import lru_cache

from hybridsearch.bm25.analyzer import Analyzer, Analyzers
from hybridsearch.security.sealing import CollectionSeal
from hybridsearch.storage.stores import chunks_by_document
from hybridsearch.v1 import common_pb2

TERM_HEX = 16  # 64 bits: see the module docstring
TERM = "term"  # the digest's purpose: a term hash never equals a tag's or a metadata value's


@lru_cache(maxsize=8)
def _analyzers(stemmer: str, stopwords: str) -> Analyzers:
    return Analyzers(stemmer, stopwords)


def hashes_terms(seal: CollectionSeal | None) -> bool:
    """Whether a collection (its seal; None: not sealed) keeps hashed terms in its BM25 index."""
    return seal is not None and seal.config.hashed_terms


class HashedTerms:
    """One process's term hashing (the gateway's writes and BM25 leg, expansion's probe, reconcile's copies),
    with the analysis the BM25 store is configured with (the bm25 section: English stemmer and stopwords)."""

    def __init__(self, bm25) -> None:  # config.stores.Bm25Settings: the analysis the BM25 store runs
        self.analyzers = _analyzers(bm25.stemmer, bm25.stopwords)

    def analyzer(self, seal: CollectionSeal) -> Analyzer:
        """The collection's analysis (its declared language), as the store runs it for a clear collection."""
        return self.analyzers.language(seal.config.language)

    @staticmethod
    def hashed(seal: CollectionSeal, terms: list[str], known: dict[str, str] | None = None) -> str:
        """Analyzed terms as a hashed-terms field holds them: each term's hash under the active key, in order.
        `known`: hashes already made with that key (a batch repeats its words: each is hashed once)."""
        known = {} if known is None else known
        out = []
        for term in terms:
            digest = known.get(term)
            if digest is None:
                digest = known[term] = seal.digest(TERM, term)[:TERM_HEX]
            out.append(digest)
        return " ".join(out)

    def query(self, seal: CollectionSeal, text: str) -> str:
        """A query as the BM25 leg is sent it: its analyzed terms, each hashed under every key the collection
        holds (OR-ed by the BM25 query's should-clauses)."""
        terms = self.analyzer(seal).analyze_query(text)
        return " ".join(digest[:TERM_HEX] for term in terms for digest in seal.digests(TERM, term))

    def chunks(self, seal: CollectionSeal, chunks) -> list[common_pb2.Chunk]:
        """Sealed chunks (CollectionSeal.seal_chunk or .copyable: clear fields to index) as the BM25 store is
        sent them: title, heading, text and the declared text fields' values as hashed terms, each document
        analyzed in its language as the store would (an `auto` collection detects it over the document)."""
        out, known = [], {}
        for doc_chunks in chunks_by_document(list(chunks)).values():
            analyzer = self.analyzer(seal).for_document(" ".join(c.text for c in doc_chunks))
            for c in doc_chunks:
                hashed = common_pb2.Chunk()
                hashed.CopyFrom(c)
                hashed.title, hashed.heading, hashed.text = (self.hashed(seal, analyzer.analyze(part), known)
                                                             for part in (c.title, c.heading, c.text))
                for key, value in c.indexed_metadata.items():
                    hashed.indexed_metadata[key] = self.hashed(seal, analyzer.analyze(value), known)
                out.append(hashed)
        return out
