"""Document readers (security/acl.py): what an acl may say, and who reads a document with it."""

from __future__ import annotations

import pytest

from hybridsearch.security.acl import (
    DEFAULT, acl_readable, admits, allow_terms, checked_acl, parse_acl, readers_key, readers_key_of, refused, wanted,
)
from hybridsearch.security.principals import PrincipalError
from hybridsearch.v1 import common_pb2

ANA = common_pb2.Readers(principals=["group:eng", "user:ana"], default_readable=True)
BOB = common_pb2.Readers(principals=["group:eng", "group:hr", "user:bob"])
NOBODY = common_pb2.Readers()


def acl(*entries: str) -> common_pb2.Acl:
    return parse_acl(entries)


def test_entries_allow_deny_and_everyone():
    assert acl("group:hr, user:ana", "!user:bob", "-group:contractors", "*") == common_pb2.Acl(
        allow=["*", "group:hr", "user:ana"], deny=["group:contractors", "user:bob"])
    assert acl() == common_pb2.Acl()
    assert allow_terms(acl("!user:bob")) == [DEFAULT]  # deny only: the collection's default readers, less bob


@pytest.mark.parametrize("entries, says", [(["hr"], "principal 'hr'"), (["!*"], "may only be allowed"),
                                           (["group:"], "principal 'group:'"), (["user:a b"], "user:a b")])
def test_a_bad_entry_is_named(entries, says):
    with pytest.raises(PrincipalError, match=says):
        parse_acl(entries, "x.md")


def test_at_most_so_many_principals():
    with pytest.raises(PrincipalError, match="at most 256"):
        checked_acl(common_pb2.Acl(allow=[f"user:u{i}" for i in range(257)]))


@pytest.mark.parametrize("entries, ana, bob, nobody", [
    (["group:eng"], True, True, False),
    (["group:hr"], False, True, False),
    (["group:eng", "!user:bob"], True, False, False),
    (["*"], True, True, True),
    (["*", "!group:hr"], True, False, True),
    ([], True, False, False),               # the collection's default readers: ana's default_readable only
    (["!user:ana"], False, False, False),   # the default, less ana
])
def test_who_reads_what(entries, ana, bob, nobody):
    document = acl(*entries)
    assert (acl_readable(ANA, document), acl_readable(BOB, document), acl_readable(NOBODY, document)) == \
        (ana, bob, nobody)
    assert acl_readable(None, document)  # no restriction (auth off)


def test_a_collection_default_admits():
    assert admits([], [], ["user:x"])  # no default: everyone the collection admits
    assert admits(["group:staff"], [], ["user:x", "group:staff"]) and not admits(["group:staff"], [], ["user:x"])
    assert not admits([], ["user:x"], ["user:x"]) and admits(["*"], ["user:y"], ["user:x"])


def test_terms_and_keys():
    assert wanted(ANA) == ["*", DEFAULT, "group:eng", "user:ana"] and wanted(NOBODY) == ["*"]
    assert refused(BOB) == ["group:eng", "group:hr", "user:bob"]
    keys = {readers_key(r) for r in (ANA, BOB, NOBODY)}
    assert len(keys) == 3 and readers_key(None) == ""
    assert readers_key(common_pb2.Readers(principals=["user:ana", "group:eng"], default_readable=True)) == \
        readers_key(ANA)  # the principals' order does not matter
    assert readers_key_of(acl("group:eng")) != readers_key_of(acl("group:eng", "!user:bob")) != readers_key_of(acl())
