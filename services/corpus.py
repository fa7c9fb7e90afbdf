"""Document sources for indexing and benchmarks: folders of files (hybridsearch.readers), BEIR corpus/queries/qrels."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from hybridsearch.readers.acl_files import with_readers
from hybridsearch.readers.folder import Folder, Skipped
from hybridsearch.readers.jsondocs import FieldMap
from hybridsearch.v1 import common_pb2, ingest_pb2


BEIR_CORPUS_NAMES = ("corpus.jsonl", "corpus.jsonl.gz")


def _open(path: Path):
    return gzip.open(path, "rt", encoding="utf-8") if path.suffix == ".gz" else open(path, encoding="utf-8")


def beir_corpus_file(folder: Path) -> Path | None:
    for name in BEIR_CORPUS_NAMES:
        if (folder / name).exists():
            return folder / name
    return None


def read_beir_corpus(path: Path) -> Iterator[ingest_pb2.Document]:
    """Every document with a title or a text; the ingest API refuses empty ones (Cranfield has one),
    and a document with nothing to match can never be retrieved anyway."""
    with _open(path) as f:
        for line in f:
            if line.strip():
                row = json.loads(line)
                title, text = row.get("title") or "", row.get("text") or ""
                if title.strip() or text.strip():
                    yield ingest_pb2.Document(id=str(row["_id"]), title=title, text=text)


def read_folder(folder: Path) -> Iterator[ingest_pb2.Document]:
    """Every document of a folder that a reader reads (hybridsearch.readers), files in path order."""
    files = Folder(folder)
    return files.documents(files.readable())


@dataclass
class Corpus:
    """What `hybridsearch index` reads: its documents, how many files or documents (when cheap to know: the
    progress bar's total) and, for a folder, what it skipped (known once the documents have been read)."""

    documents: Iterator[ingest_pb2.Document]
    count: int | None
    folder: Folder | None = None  # a folder's files: what it indexed and skipped, known once the documents are read
    unit: str = "documents"

    @property
    def skipped(self) -> Skipped | None:
        return self.folder.skipped if self.folder is not None else None


def open_corpus(path: Path, include: list[str] | None = None, exclude: list[str] | None = None,
                fields: FieldMap | None = None, on_file=None, follow_symlinks: bool = False,
                acl: common_pb2.Acl | None = None) -> Corpus:
    """A BEIR corpus file (or its folder), else a folder of files for the readers; `on_file` is called after
    each file of a folder is read (a progress bar); symlinks leaving the folder are followed only when asked.
    `acl`: the readers of every document that names none (a folder's `.acl` files and front matter name theirs)."""
    if path.is_file() and (path.name in BEIR_CORPUS_NAMES or path.suffix == ".gz"):
        return Corpus(with_readers(read_beir_corpus(path), acl), sum(1 for _ in read_beir_corpus(path)))
    corpus = beir_corpus_file(path) if path.is_dir() and not (include or exclude) else None
    if corpus is not None:
        return open_corpus(corpus, acl=acl)
    root, only = (path.parent, [path.name]) if path.is_file() else (path, include or [])
    folder = Folder(root, only, exclude or [], fields or FieldMap(), follow_symlinks=follow_symlinks, acl=acl)
    readable = folder.readable()
    return Corpus(folder.documents(readable, on_file), len(readable), folder, "files")


def read_documents(path: Path) -> tuple[Iterator[ingest_pb2.Document], int | None]:
    """Documents under `path` and, when cheap to know, how many there are."""
    corpus = open_corpus(path)
    return corpus.documents, corpus.count


def read_queries(folder: Path) -> dict[str, str]:
    with open(folder / "queries.jsonl", encoding="utf-8") as f:
        return {str(r["_id"]): r["text"] for r in map(json.loads, filter(str.strip, f))}


def read_qrels(folder: Path, split: str = "test") -> dict[str, dict[str, int]]:
    qrels: dict[str, dict[str, int]] = {}
    with open(folder / "qrels" / f"{split}.tsv", encoding="utf-8") as f:
        for i, line in enumerate(f):
            parts = line.rstrip("\n").split("\t")
            if i == 0 and not parts[-1].lstrip("-").isdigit():
                continue  # header
            qid, did, rel = parts[0], parts[1], int(parts[2])
            qrels.setdefault(qid, {})[did] = rel
    return qrels


def load_judged_queries(folder: Path, limit: int = 0) -> tuple[dict[str, str], dict[str, dict[str, int]]]:
    """Queries that have judgments, and their judgments (unjudged queries are skipped, as trec_eval does);
    with `limit`, only the first `limit` of them."""
    qrels = read_qrels(folder)
    queries = {q: t for q, t in read_queries(folder).items() if q in qrels}
    if limit:
        queries = dict(list(queries.items())[:limit])
    qrels = {q: r for q, r in qrels.items() if q in queries}
    return queries, qrels


def ignores_identical_ids(folder: Path) -> bool:
    """BEIR's convention for ArguAna: a hit whose id equals the query id is dropped before scoring."""
    return folder.resolve().name.lower() == "arguana"
