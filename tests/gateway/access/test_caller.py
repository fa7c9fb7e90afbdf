"""Who a call is on behalf of (gateway/access/caller.py): the principals a key may name when it acts for someone,
and the caller's rights on collections."""

from __future__ import annotations

import pytest

from hybridsearch.gateway.access.caller import Caller, acted_for, may_assert
from hybridsearch.security.apikeys import parse_entry
from hybridsearch.security.principals import PrincipalError

SERVICE = parse_entry({"id": "0000000b", "tenant": "app", "sha256": "b" * 64, "read": ["docs-*"],
                       "may_act_for": ["user:*", "group:eng-*", "group:all"]}, "test")


def test_a_key_names_whom_its_patterns_allow():
    assert acted_for("user:ana, group:eng-ml,group:all", SERVICE) == {"user:ana", "group:eng-ml", "group:all"}
    assert may_assert(SERVICE.may_act_for, "group:eng-") and not may_assert(SERVICE.may_act_for, "group:engineering")
    with pytest.raises(PermissionError, match="may not act for group:hr"):
        acted_for("user:ana,group:hr", SERVICE)
    with pytest.raises(PrincipalError, match="names no user"):
        acted_for("group:eng-ml", SERVICE)
    with pytest.raises(PrincipalError, match="names 1-64 principals"):
        acted_for(" , ", SERVICE)
    with pytest.raises(PrincipalError, match="names 1-64 principals"):
        acted_for(",".join(f"user:u{i}" for i in range(65)), SERVICE)


def test_a_callers_rights_are_its_keys_or_its_tokens_reads():
    acting = Caller(frozenset({"user:ana"}), key=SERVICE, acting_for=True)
    assert acting.may("read", "docs-a") and not acting.may("read", "hr") and not acting.may("write", "docs-a")
    token = Caller(frozenset({"user:ana"}), subject="ana", token_read=("docs-*",))
    assert token.may("read", "docs-a") and not token.may("write", "docs-a") and not token.may("admin", "docs-a")
    assert token.who == "token of 'ana'" and acting.who == "API key 0000000b (tenant 'app')"
    assert acting.audit() == {"key": "0000000b", "tenant": "app", "subject": None, "acting_for": True,
                              "principals": ["user:ana"]}
