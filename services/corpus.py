"""Document sources for indexing and benchmarks: folders of .md/.txt, BEIR corpus/queries/qrels."""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Iterator
from pathlib import Path

from hybridsearch.v1 import ingest_pb2

TEXT_SUFFIXES = {".md", ".markdown", ".txt"}
SAFE_ID = re.compile(r"[^\w./-]+")


def _open(path: Path):
    return gzip.open(path, "rt", encoding="utf-8") if path.suffix == ".gz" else open(path, encoding="utf-8")


def beir_corpus_file(folder: Path) -> Path | None:
    for name in ("corpus.jsonl", "corpus.jsonl.gz"):
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
    for path in sorted(p for p in folder.rglob("*") if p.suffix.lower() in TEXT_SUFFIXES and p.is_file()):
        rel = path.relative_to(folder).as_posix()
        text = path.read_text(encoding="utf-8", errors="replace")
        title = next((line.lstrip("#").strip() for line in text.splitlines() if line.startswith("# ")), path.stem)
        yield ingest_pb2.Document(
            id=SAFE_ID.sub("_", rel)[:256], title=title, text=text,
            metadata={"path": rel, "type": path.suffix.lower().lstrip("."), "folder": path.parent.relative_to(folder).as_posix()},
        )


def read_documents(path: Path) -> tuple[Iterator[ingest_pb2.Document], int | None]:
    """Documents under `path` and, when cheap to know, how many there are."""
    if path.is_file():
        count = sum(1 for _ in read_beir_corpus(path))
        return read_beir_corpus(path), count
    corpus = beir_corpus_file(path)
    if corpus is not None:
        return read_documents(corpus)
    files = [p for p in path.rglob("*") if p.suffix.lower() in TEXT_SUFFIXES]
    return read_folder(path), len(files)


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
