"""Principals: whom documents are read as, `user:<name>` and `group:<name>`, and the patterns of them a key may act
for. Who a call is on behalf of is gateway/access/caller.py's; it comes from one of three places:
- an API key alone: the key's own principals (`keys create --principal user:ana --principal group:eng`);
- an API key that acts for someone (a service searching on behalf of its user): the principals it names in the
  `x-hybridsearch-act-for` header, each of which the key must be allowed to assert (`--may-act-for 'user:*'`);
  the key's collection rights stay the bound of what the user reaches;
- a bearer JWT of the organisation's identity provider (security/oidc.py): `user:<subject>` and a `group:` per
  group of its groups claim; the collections `auth.oidc.read` names, for reading only.
Principals are what documents' readers are written in; collection rights stay the keys'.
"""

from __future__ import annotations

import re

KINDS = ("user", "group")
NAME = r"[A-Za-z0-9][A-Za-z0-9_.@+|/=-]{0,127}"  # an identity provider's subjects too (auth0|62a1..., a GUID)
PRINCIPAL = re.compile(rf"(user|group):{NAME}")
# What a key may assert when it acts for someone: a principal, or every principal of a kind (`user:*`), or those
# with a prefix (`group:eng-*`).
ACT_PATTERN = re.compile(rf"(user|group):({NAME}\*?|\*)")
ACT_FOR_HEADER = "x-hybridsearch-act-for"
MAX_ACT_FOR = 64  # principals one call may name (a user and their groups)


class PrincipalError(ValueError):
    """A principal or an act-for pattern that is not one."""


def _checked(value: str, form: re.Pattern, what: str, how: str) -> str:
    value = value.strip()
    if not form.fullmatch(value):
        raise PrincipalError(f"{what} {value[:140]!r} is not one: {how}")
    return value


def check_principal(value: str) -> str:
    return _checked(value, PRINCIPAL, "principal", "write user:<name> or group:<name> (1-128 characters of "
                                                    "[A-Za-z0-9_.@+|/=-], a letter or digit first)")


def check_act_pattern(value: str) -> str:
    return _checked(value, ACT_PATTERN, "act-for pattern", "a principal (user:ana), a kind (user:*) or a prefix "
                                                            "(group:eng-*)")
