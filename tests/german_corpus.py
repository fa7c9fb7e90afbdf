"""The German test collection (tests/data/german, BEIR layout) as chunks and queries, for the tests that
use it (bm25 engines, OpenSearch, the gateway stack). A module of its own, like stacks.py."""

from __future__ import annotations

from pathlib import Path

from hybridsearch.corpus import read_beir_corpus, read_qrels, read_queries
from hybridsearch.v1 import common_pb2, ingest_pb2

GERMAN = Path(__file__).resolve().parent / "data" / "german"


def german_documents() -> list[ingest_pb2.Document]:
    return list(read_beir_corpus(GERMAN / "corpus.jsonl"))


def german_chunks() -> list[common_pb2.Chunk]:
    """One chunk per document (every document is short), as the engines store it."""
    return [common_pb2.Chunk(chunk_id=f"{d.id}#0", doc_id=d.id, title=d.title, text=d.text, content_hash=d.id)
            for d in german_documents()]


def german_queries() -> list[str]:
    return list(read_queries(GERMAN).values())


def german_judgements() -> list[tuple[str, str]]:
    """(query, its one relevant document id), in queries.jsonl's order."""
    qrels = read_qrels(GERMAN)
    return [(text, next(iter(qrels[qid]))) for qid, text in read_queries(GERMAN).items()]
