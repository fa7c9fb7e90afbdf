"""A folder's files as documents, every file accounted for: which files (`--include/--exclude` globs, hidden and
dependency folders left out), which reader reads each (registry.READERS), and for every file offered that is
not indexed, why (`Skip`, by `Reason`).

Each file is its own unit: one that cannot be read, is binary, or holds a document over the ingest API's
limits is skipped with its reason and the others go on. In a JSON or JSON Lines file each record is the unit:
a bad line or a record without text is skipped with its line. Ids come from paths, escaped reversibly
(base.escaped_id), and two sources that would still give one id (a JSON record's own id repeated) are refused
naming both. A symlink whose target is outside the folder is not followed unless `follow_symlinks`; one
inside it is read where it points. Files without a reader (`.png`) are counted by extension (`Skipped`):
they were never for indexing."""

from __future__ import annotations

import logging
import os
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import Enum
from fnmatch import fnmatch
from pathlib import Path

from hybridsearch.contract.validation import check_document
from hybridsearch.contract.errors import InvalidArgument
from hybridsearch.readers.acl_files import ACL_FILE, FolderReaders, with_readers
from hybridsearch.readers.base import SourceFile
from hybridsearch.security.principals import PrincipalError
from hybridsearch.readers.jsondocs import FieldMap
from hybridsearch.readers.registry import READERS, Kind, ReaderMissing, reader
from hybridsearch.v1 import common_pb2, ingest_pb2

log = logging.getLogger(__name__)
NO_EXTENSION = "(none)"
SKIPPED_DIRS = {"node_modules", "__pycache__", "venv", ".venv"}
SNIFF_BYTES = 8192  # the head of a file read to tell binary from text
BINARY_KINDS = {Kind.PDF}  # kinds whose files are binary by nature: never sniffed


def matches(rel: str, globs: list[str]) -> bool:
    """Whether a relative path matches any glob: against the whole path, and a glob without "/" against the name."""
    name = rel.rpartition("/")[2]
    return any(fnmatch(rel, g) or ("/" not in g and fnmatch(name, g)) for g in globs)


class Reason(Enum):
    """Why a file (or a JSON record) offered for indexing was not indexed, as the summary names it."""

    BINARY = "binary"
    OVER_A_LIMIT = "over a limit"
    UNREADABLE = "unreadable"
    READER_MISSING = "reader not installed"
    SYMLINK_OUTSIDE = "symlink leaving the folder"
    ID_COLLISION = "id taken by another file"
    BAD_RECORD = "bad JSON line"
    NO_TEXT = "no text"
    REFUSED = "refused by the gateway"
    BAD_READERS = "readers not valid"  # its front matter's `acl:` or the `.acl` file above it (readers/acl_files.py)


@dataclass(frozen=True)
class Skip:
    where: str  # a relative path, or `path line N` / `path record N` for a JSON record
    reason: Reason
    detail: str


@dataclass
class Skipped:
    """Files without a reader, by extension ("(none)" for a name without one): never offered for indexing."""

    by_extension: Counter = field(default_factory=Counter)

    def add(self, path: Path) -> None:
        self.by_extension[path.suffix.lower() or NO_EXTENSION] += 1

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


def is_binary(path: Path) -> str:
    """Why the file's head reads as binary ("" when it is text): a NUL byte, or bytes that are not UTF-8."""
    with open(path, "rb") as f:
        head = f.read(SNIFF_BYTES)
    if b"\0" in head:
        return f"NUL bytes in its first {len(head)} bytes"
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as err:
        if err.start < len(head) - 4:  # not a character cut at the end of the sniffed head
            return f"not UTF-8 text (byte {err.start} is 0x{head[err.start]:02x})"
    return ""


@dataclass
class Folder:
    root: Path
    include: list[str] = field(default_factory=list)
    exclude: list[str] = field(default_factory=list)
    fields: FieldMap = field(default_factory=FieldMap)
    skipped: Skipped = field(default_factory=Skipped)
    follow_symlinks: bool = False
    skips: list[Skip] = field(default_factory=list)  # what was offered and not indexed, in path order
    indexed_files: set[str] = field(default_factory=set)  # files at least one document came from
    _ids: dict[str, str] = field(default_factory=dict)  # document id -> the source that gave it
    acl: common_pb2.Acl | None = None  # `index --acl`: the readers of files no `.acl` or front matter names any for
    readers: FolderReaders = field(init=False)

    def __post_init__(self) -> None:
        self.readers = FolderReaders(self.root, self.acl)

    def _walk(self) -> Iterator[Path]:
        """Every file under the root, hidden and dependency folders left out; folder symlinks followed only with
        follow_symlinks (each real folder once, so a link loop ends)."""
        seen: set[str] = set()
        for folder, dirs, files in os.walk(self.root, followlinks=self.follow_symlinks):
            real = os.path.realpath(folder)
            if real in seen:
                dirs[:] = []
                continue
            seen.add(real)
            dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in SKIPPED_DIRS)
            for d in dirs:
                if os.path.islink(os.path.join(folder, d)) and not self.follow_symlinks:
                    self._outside_or_inside(Path(folder) / d)
            yield from (Path(folder) / name for name in sorted(files))

    def _outside_or_inside(self, link: Path) -> None:
        """A folder symlink not followed: skipped when it leaves the folder (inside, its files are read there)."""
        target = link.resolve()
        if not target.is_relative_to(self.root.resolve()):
            self.skips.append(Skip(self._rel(link) + "/", Reason.SYMLINK_OUTSIDE,
                                   f"a folder link to {target}: --follow-symlinks follows it"))

    def _rel(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix()

    def files(self) -> list[Path]:
        """The files the globs let in, sorted; a symlink leaving the folder is skipped (unless followed)."""
        out = []
        root = self.root.resolve()
        for path in sorted(self._walk()):
            rel = self._rel(path)
            if (self.include and not matches(rel, self.include)) or matches(rel, self.exclude):
                continue
            if path.is_symlink():
                target = path.resolve()
                if not target.is_file():
                    self.skips.append(Skip(rel, Reason.UNREADABLE, f"a broken link to {os.readlink(path)}"))
                    continue
                if not self.follow_symlinks and not target.is_relative_to(root):
                    self.skips.append(Skip(rel, Reason.SYMLINK_OUTSIDE,
                                           f"a link to {target}: --follow-symlinks follows it"))
                    continue
            elif not path.is_file() or path.name == ACL_FILE:  # a folder's readers (readers/acl_files.py), no document
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
        """The documents of these files, in order, each checked against the ingest API's limits; what is not
        indexed goes to `skips`. `on_file()` after each file (a progress bar)."""
        for path in paths:
            yield from self._file(path)
            if on_file is not None:
                on_file()

    def _file(self, path: Path) -> list[ingest_pb2.Document]:
        rel = self._rel(path)
        kind = READERS[path.suffix.lower()]
        try:
            if kind not in BINARY_KINDS and (why := is_binary(path)):
                return self._skip(rel, Reason.BINARY, why)
            read = reader(kind, fields=self.fields) if kind is Kind.JSON else reader(kind)
            documents = list(read.read(SourceFile(path, self.root)))
            own = self.readers.of(path)
        except ReaderMissing as err:
            return self._skip(rel, Reason.READER_MISSING, str(err))
        except PrincipalError as err:
            return self._skip(rel, Reason.BAD_READERS, str(err))
        except Exception as err:  # one unreadable file (bad JSON, a broken PDF) must not stop the folder
            log.warning("skipped %s: %s", path, err)
            return self._skip(rel, Reason.UNREADABLE, f"{type(err).__name__}: {err}")
        records = kind is Kind.JSON
        if records:
            self.skips += [Skip(s.where, Reason.BAD_RECORD if s.bad_json else Reason.NO_TEXT, s.reason)
                           for s in read.skips]
        elif not documents:
            return self._skip(rel, Reason.NO_TEXT, "the reader found nothing to index")
        kept = []
        for doc in with_readers(documents, own):
            where = f"{rel} ({doc.id})" if records and len(documents) > 1 else rel
            try:
                check_document(doc, where)
            except InvalidArgument as err:
                if not records:  # a file is one unit: none of its documents goes
                    return self._skip(rel, Reason.OVER_A_LIMIT, str(err))
                self.skips.append(Skip(where, Reason.OVER_A_LIMIT, str(err)))
                continue
            if (first := self._ids.setdefault(doc.id, where)) != where:
                self.skips.append(Skip(where, Reason.ID_COLLISION,
                                       f"its id {doc.id!r} is {first}'s: rename one (or give records distinct ids)"))
                continue
            kept.append(doc)
        if kept:
            self.indexed_files.add(rel)
        return kept

    def _skip(self, where: str, reason: Reason, detail: str) -> list:
        self.skips.append(Skip(where, reason, detail))
        return []

    def refused(self, where: str, detail: str) -> None:
        """A document the gateway refused (INVALID_ARGUMENT) although it passed the checks here."""
        self.skips.append(Skip(where, Reason.REFUSED, detail))
