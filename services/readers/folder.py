"""A folder's files as documents: which files (`--include/--exclude` globs, hidden folders left out), which
reader reads each (registry.READERS), and what was skipped, counted by extension (`12 skipped: .png 9,
.lock 3`). A file a reader cannot read (not UTF-8 JSON, a broken PDF) is skipped and counted too."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from fnmatch import fnmatch
from pathlib import Path

from hybridsearch.readers.base import SourceFile
from hybridsearch.readers.jsondocs import FieldMap
from hybridsearch.readers.registry import READERS, Kind, ReaderMissing, reader
from hybridsearch.v1 import ingest_pb2

log = logging.getLogger(__name__)
NO_EXTENSION = "(none)"
SKIPPED_DIRS = {"node_modules", "__pycache__", "venv", ".venv"}


def matches(rel: str, globs: list[str]) -> bool:
    """Whether a relative path matches any glob: against the whole path, and a glob without "/" against the name."""
    name = rel.rpartition("/")[2]
    return any(fnmatch(rel, g) or ("/" not in g and fnmatch(name, g)) for g in globs)


@dataclass
class Skipped:
    """Files left out, by extension ("(none)" for a name without one), and why, when not for want of a reader."""

    by_extension: Counter = field(default_factory=Counter)
    reasons: dict[str, str] = field(default_factory=dict)

    def add(self, path: Path, reason: str = "") -> None:
        self.by_extension[path.suffix.lower() or NO_EXTENSION] += 1
        if reason:
            self.reasons.setdefault(path.suffix.lower(), reason)

    @property
    def total(self) -> int:
        return sum(self.by_extension.values())

    @property
    def line(self) -> str:
        """"12 skipped: .png 9, .lock 3" (empty when none were)."""
        if not self.total:
            return ""
        ordered = sorted(self.by_extension.items(), key=lambda kv: (-kv[1], kv[0] == NO_EXTENSION, kv[0]))
        counts = ", ".join(f"{ext} {n}" for ext, n in ordered)
        return f"{self.total} skipped: {counts}"


@dataclass
class Folder:
    root: Path
    include: list[str] = field(default_factory=list)
    exclude: list[str] = field(default_factory=list)
    fields: FieldMap = field(default_factory=FieldMap)
    skipped: Skipped = field(default_factory=Skipped)

    def files(self) -> list[Path]:
        """The files the globs let in, sorted; files of hidden folders and dependency folders are not looked at."""
        out = []
        for path in sorted(self.root.rglob("*")):
            rel = path.relative_to(self.root)
            if any(part.startswith(".") or part in SKIPPED_DIRS for part in rel.parts[:-1]) or not path.is_file():
                continue
            if (self.include and not matches(rel.as_posix(), self.include)) or matches(rel.as_posix(), self.exclude):
                continue
            out.append(path)
        return out

    def readable(self) -> list[Path]:
        """The files a reader will read; the others are counted as skipped here."""
        out = []
        for path in self.files():
            if path.suffix.lower() in READERS:
                out.append(path)
            else:
                self.skipped.add(path)
        return out

    def documents(self, paths: list[Path], on_file=None) -> Iterator[ingest_pb2.Document]:
        """The documents of these files, in order; `on_file()` after each file (a progress bar)."""
        for path in paths:
            kind = READERS[path.suffix.lower()]
            try:
                read = reader(kind, fields=self.fields) if kind is Kind.JSON else reader(kind)
                yield from list(read.read(SourceFile(path, self.root)))
            except ReaderMissing as err:
                self.skipped.add(path, str(err))
            except Exception as err:  # one unreadable file (bad JSON, a broken PDF) must not stop the folder
                log.warning("skipped %s: %s", path, err)
                self.skipped.add(path, f"unreadable ({type(err).__name__}: {err})")
            if on_file is not None:
                on_file()
