"""Principals (security/principals.py): what may be written as a user or group, and as a pattern to act for."""

from __future__ import annotations

import pytest

from hybridsearch.security.apikeys import KeyFileError, parse_entry
from hybridsearch.security.principals import PrincipalError, check_act_pattern, check_principal


@pytest.mark.parametrize("value", ["user:ana", "group:eng", "user:auth0|62a1b", "user:ana@example.test",
                                   "group:0f8c-41/x=", " user:ana "])
def test_principals(value):
    assert check_principal(value) == value.strip()


@pytest.mark.parametrize("value", ["ana", "role:eng", "user:", "user:*", "user:ana,bob", "group:a b", "user:-x",
                                   "user:" + "a" * 129, "USER:ana"])
def test_what_is_no_principal(value):
    with pytest.raises(PrincipalError, match="is not one"):
        check_principal(value)


def test_act_for_patterns():
    assert [check_act_pattern(p) for p in ("user:*", "group:eng-*", "user:ana")] == ["user:*", "group:eng-*", "user:ana"]
    for bad in ("*", "user:a*b", "team:*", "user:**"):
        with pytest.raises(PrincipalError):
            check_act_pattern(bad)


def test_a_keys_file_entry_with_a_bad_principal_is_refused_naming_it():
    base = {"id": "0000000a", "tenant": "t", "sha256": "a" * 64}
    entry = parse_entry({**base, "principals": ["user:ana", "user:ana", "group:eng"], "may_act_for": ["user:*"]}, "x")
    assert entry.principals == ("user:ana", "group:eng") and entry.may_act_for == ("user:*",)
    assert parse_entry(entry.to_dict(), "again") == entry
    with pytest.raises(KeyFileError, match="principal 'bob' is not one"):
        parse_entry({**base, "principals": ["bob"]}, "x")
    with pytest.raises(KeyFileError, match="act-for pattern"):
        parse_entry({**base, "may_act_for": ["*"]}, "x")
