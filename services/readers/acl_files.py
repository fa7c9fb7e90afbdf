"""Who reads the documents of a folder (security/acl.py): a `.acl` file in a folder names the readers of every file
under it, the nearest one up to the root winning; a Markdown file's front matter (`acl:`) names its own; `index
--acl` names those of every document that none of these do.

A `.acl` file holds entries, one or more a line (commas between), `#` starting a comment:

    # the platform team and Ana, never the contractors
    group:platform, user:ana
    !group:contractors

`group:hr` allows, `!user:bob` (or `-user:bob`) denies, `*` allows every caller the collection admits. An empty
one (only comments) changes nothing: the `.acl` above it, else `--acl`, else the collection's default readers.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

from hybridsearch.security.acl import parse_acl
from hybridsearch.security.principals import PrincipalError
from hybridsearch.v1 import common_pb2, ingest_pb2

ACL_FILE = ".acl"


def read_acl_file(path: Path) -> common_pb2.Acl:
    """A `.acl` file's readers; PrincipalError naming the file and the entry that is not one."""
    lines = (line.split("#", 1)[0] for line in path.read_text(encoding="utf-8").splitlines())
    return parse_acl([line for line in lines if line.strip()], str(path))


def parse_acl_entries(entries: Iterable[str] | str, where: str) -> common_pb2.Acl:
    """Readers written as a list of entries or one comma-separated string (front matter, `--acl`)."""
    return parse_acl([entries] if isinstance(entries, str) else [str(e) for e in entries], where)


class FolderReaders:
    """The readers of each file of a folder: its nearest `.acl` (up to the root), else `base` (`index --acl`)."""

    def __init__(self, root: Path, base: common_pb2.Acl | None = None) -> None:
        self.root, self.base = root, base
        self._of_dir: dict[Path, common_pb2.Acl | None | PrincipalError] = {}

    def _of(self, folder: Path) -> common_pb2.Acl | None | PrincipalError:
        if folder not in self._of_dir:
            file = folder / ACL_FILE
            if file.is_file():
                try:
                    found = read_acl_file(file)
                except PrincipalError as err:
                    found = err
                found = found if isinstance(found, PrincipalError) or found.allow or found.deny else None
            else:
                found = None
            if found is None and folder != self.root and self.root in folder.parents:
                found = self._of(folder.parent)
            self._of_dir[folder] = found
        return self._of_dir[folder]

    def of(self, path: Path) -> common_pb2.Acl | None:
        """The readers of a file under the root (None: the collection's default); PrincipalError when the `.acl`
        that decides them is not valid (its files are skipped with the reason: none is indexed with readers other
        than meant)."""
        found = self._of(path.parent)
        if isinstance(found, PrincipalError):
            raise found
        return found if found is not None else self.base


def with_readers(documents: Iterable[ingest_pb2.Document], acl: common_pb2.Acl | None) -> Iterator[ingest_pb2.Document]:
    """The documents, each without readers of its own given `acl` (none: as they are)."""
    for doc in documents:
        if acl is not None and not doc.HasField("acl"):
            doc.acl.CopyFrom(acl)
        yield doc
