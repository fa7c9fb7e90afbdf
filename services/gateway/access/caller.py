"""Who a call is on behalf of (security/principals.py says what a principal is): the caller the gateway's access
check admitted, kept for the call (auth.CALLER), with its principals and its rights on collections."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from hybridsearch.security.apikeys import KeyEntry, Operation, matches
from hybridsearch.security.principals import ACT_FOR_HEADER, MAX_ACT_FOR, PrincipalError, check_principal


def may_assert(patterns: Iterable[str], principal: str) -> bool:
    """Whether a key with these act-for patterns may name `principal` (`kind:*`, `kind:prefix*`, or exact)."""
    kind, _, name = principal.partition(":")
    for pattern in patterns:
        p_kind, _, p_name = pattern.partition(":")
        if p_kind == kind and matches(p_name, name):
            return True
    return False


def acted_for(header: str, key: KeyEntry) -> frozenset[str]:
    """The principals an `x-hybridsearch-act-for` value names (comma-separated), each one the key may assert;
    PrincipalError for a malformed one, PermissionError for one the key may not assert (the first named)."""
    named = [p for p in (part.strip() for part in header.split(",")) if p]
    if not named or len(named) > MAX_ACT_FOR:
        raise PrincipalError(f"{ACT_FOR_HEADER} names 1-{MAX_ACT_FOR} principals, got {len(named)}")
    principals = [check_principal(p) for p in named]
    if not any(p.startswith("user:") for p in principals):
        raise PrincipalError(f"{ACT_FOR_HEADER} names no user: a key acts for a user (user:<name>, and their groups)")
    for principal in principals:
        if not may_assert(key.may_act_for, principal):
            raise PermissionError(f"API key {key.id} (tenant {key.tenant!r}) may not act for {principal}"
                                  + ("" if key.may_act_for else ": it acts for nobody (keys create --may-act-for)"))
    return frozenset(principals)


@dataclass(frozen=True)
class Caller:
    """Who a call is on behalf of."""

    principals: frozenset[str]
    key: KeyEntry | None = None  # the API key that authenticated the call; None for a bearer JWT
    acting_for: bool = False  # the principals are a user's the key named (x-hybridsearch-act-for)
    subject: str = ""  # a bearer JWT's subject (its `user:` principal's name)
    token_read: tuple[str, ...] = ()  # the collections a bearer JWT may read (auth.oidc.read)

    def may(self, operation: Operation, collection: str) -> bool:
        if self.key is not None:
            return self.key.may(operation, collection)
        return operation == "read" and any(matches(p, collection) for p in self.token_read)

    @property
    def who(self) -> str:
        """The caller as refusals and the audit log name it: the key's id and tenant, or the token's subject."""
        if self.key is None:
            return f"token of {self.subject!r}"
        return f"API key {self.key.id} (tenant {self.key.tenant!r})"

    def audit(self) -> dict:
        """The audit log's fields of the caller: both the key and whom it acts for, when it does."""
        return {"key": self.key.id if self.key else None, "tenant": self.key.tenant if self.key else None,
                "subject": self.subject or None, "acting_for": self.acting_for, "principals": sorted(self.principals)}
