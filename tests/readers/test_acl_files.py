"""A folder's readers (readers/acl_files.py): `.acl` files, front matter `acl:`, `index --acl`, and a bad one skipping
the files it decides with its reason."""

from __future__ import annotations

from hybridsearch.corpus import open_corpus
from hybridsearch.readers.folder import Reason
from hybridsearch.security.acl import parse_acl


def write(path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_the_nearest_acl_front_matter_and_the_base(tmp_path):
    write(tmp_path / "top.md", "# top\nplain text")
    write(tmp_path / "hr" / ".acl", "# people data\ngroup:hr, user:ana\n!user:temp\n")
    write(tmp_path / "hr" / "pay.md", "# pay\nsalaries")
    write(tmp_path / "hr" / "deep" / "review.txt", "reviews")
    write(tmp_path / "hr" / "open" / ".acl", "*\n")
    write(tmp_path / "hr" / "open" / "faq.md", "---\ntitle: FAQ\nacl: [group:eng, '!user:bob']\n---\nanswers")
    write(tmp_path / "hr" / "open" / "holidays.md", "# holidays\ndates")
    write(tmp_path / "hr" / "empty" / ".acl", "# nothing here\n")
    write(tmp_path / "hr" / "empty" / "note.md", "# note\ntext")
    corpus = open_corpus(tmp_path, acl=parse_acl(["group:staff"]))
    readers = {d.id: (sorted(d.acl.allow), sorted(d.acl.deny)) for d in corpus.documents}
    assert readers == {
        "top.md": (["group:staff"], []),                                  # --acl: no .acl above it
        "hr/pay.md": (["group:hr", "user:ana"], ["user:temp"]),
        "hr/deep/review.txt": (["group:hr", "user:ana"], ["user:temp"]),  # the nearest .acl up the tree
        "hr/open/faq.md": (["group:eng"], ["user:bob"]),                   # its front matter over any .acl
        "hr/open/holidays.md": (["*"], []),
        "hr/empty/note.md": (["group:hr", "user:ana"], ["user:temp"]),    # an empty .acl changes nothing
    }
    assert not corpus.folder.skips and corpus.folder.skipped.total == 0  # .acl files are no documents


def test_no_readers_named_anywhere_leaves_the_collection_default(tmp_path):
    write(tmp_path / "a.md", "# a\ntext")
    (doc,) = open_corpus(tmp_path).documents
    assert not doc.HasField("acl") and "acl" not in doc.metadata


def test_a_bad_acl_skips_what_it_decides_with_the_reason(tmp_path):
    write(tmp_path / "ok.md", "# ok\ntext")
    write(tmp_path / "secret" / ".acl", "group:hr\nhr-team\n")
    write(tmp_path / "secret" / "a.md", "# a\ntext")
    write(tmp_path / "typo.md", "---\nacl: [grup:eng]\n---\nbody")
    corpus = open_corpus(tmp_path)
    assert [d.id for d in corpus.documents] == ["ok.md"]
    skipped = {s.where: (s.reason, s.detail) for s in corpus.folder.skips}
    assert skipped["secret/a.md"][0] is Reason.BAD_READERS and "'hr-team'" in skipped["secret/a.md"][1]
    assert skipped["typo.md"][0] is Reason.BAD_READERS and "'grup:eng'" in skipped["typo.md"][1]
