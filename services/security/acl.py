"""Document readers (issue 36): what a document's `acl` may say, how a store keeps it, and whom a read is for.

A document carries `Acl(allow, deny)` (common.proto): principals (security/principals.py) or `*`, every caller the
collection admits. A document without an `allow` list is read as the collection's default readers say
(CollectionConfig.acl); its `deny` still holds. A caller with principals P reads a document when `allow` holds one of
P or `*` (or the document has no allow list and the default admits the caller) and `deny` holds none of P.

The stores keep the rule as terms, the same on every engine, so each filters inside its own search (before ranking:
the top-k is full of readable documents however few they are):
- `allow_terms(acl)`: the document's allow list, or DEFAULT when it has none;
- a read's `Readers` (the gateway's, from the caller) asks for any of `wanted(readers)` among the allow terms and
  none of `refused(readers)` among the deny terms.
tantivy keeps them as `meta` terms under reserved keys (`@allow=`, `@deny=`: no metadata key starts with `@`), Qdrant
(edge and server) as the payload arrays ALLOW and DENY, OpenSearch as keyword fields of the same names.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from hybridsearch.security.principals import PrincipalError, check_principal
from hybridsearch.v1 import common_pb2

EVERYONE = "*"
DEFAULT = "@default"  # the stored allow term of a document without its own allow list
ALLOW, DENY = "acl_allow", "acl_deny"  # payload fields (Qdrant) and keyword fields (OpenSearch)
MAX_PRINCIPALS = 256  # principals an acl's allow or deny list may name


def checked_acl(acl: common_pb2.Acl, where: str = "acl") -> common_pb2.Acl:
    """The acl with its principals checked and put in order (PrincipalError names the bad one and where)."""
    lists = {}
    for side in ("allow", "deny"):
        values = list(getattr(acl, side))
        if len(values) > MAX_PRINCIPALS:
            raise PrincipalError(f"{where}.{side} names {len(values)} principals: at most {MAX_PRINCIPALS}")
        try:
            lists[side] = sorted({v.strip() if v.strip() == EVERYONE and side == "allow" else check_principal(v)
                                  for v in values})
        except PrincipalError as err:
            raise PrincipalError(f"{where}.{side}: {err}" + ("; `*` (everyone) may only be allowed"
                                                             if any(v.strip() == EVERYONE for v in values) else ""))
    return common_pb2.Acl(allow=lists["allow"], deny=lists["deny"])


def parse_acl(entries: Iterable[str], where: str = "acl") -> common_pb2.Acl:
    """An acl from written entries: `group:hr` allows, `!user:bob` (or `-user:bob`) denies, `*` allows everyone; a
    comma-separated string of them counts as several (front matter, `.acl` files, `--acl`)."""
    allow, deny = [], []
    for entry in (part.strip() for e in entries for part in str(e).split(",")):
        if not entry:
            continue
        if entry[0] in "!-":
            deny.append(entry[1:].strip())
        else:
            allow.append(entry)
    return checked_acl(common_pb2.Acl(allow=allow, deny=deny), where)


def allow_terms(acl: common_pb2.Acl) -> list[str]:
    return sorted(acl.allow) or [DEFAULT]


def deny_terms(acl: common_pb2.Acl) -> list[str]:
    return sorted(acl.deny)


def wanted(readers: common_pb2.Readers) -> list[str]:
    """The allow terms any of which a document these readers read holds."""
    return sorted({*readers.principals, EVERYONE, *([DEFAULT] if readers.default_readable else [])})


def refused(readers: common_pb2.Readers) -> list[str]:
    """The deny terms none of which a document these readers read may hold."""
    return sorted(set(readers.principals))


def readable(readers: common_pb2.Readers | None, allow: Iterable[str], deny: Iterable[str]) -> bool:
    """Whether a document with these stored terms is one the readers read (None: no restriction)."""
    if readers is None:
        return True
    return bool(set(wanted(readers)) & set(allow)) and not set(refused(readers)) & set(deny)


def acl_readable(readers: common_pb2.Readers | None, acl: common_pb2.Acl) -> bool:
    return readable(readers, allow_terms(acl), deny_terms(acl))


def admits(allow: Iterable[str], deny: Iterable[str], principals: Iterable[str]) -> bool:
    """Whether a collection's default readers (CollectionConfig.acl) admit these principals; an empty allow list
    admits everyone the collection admits."""
    principals = set(principals)
    return bool((principals | {EVERYONE}) & (set(allow) or {EVERYONE})) and not principals & set(deny)


def readers_key(readers: common_pb2.Readers | None) -> str:
    """A short key naming these readers (cache entries and page orders are theirs alone); "" for no restriction."""
    if readers is None:
        return ""
    text = "\n".join([*sorted(readers.principals), f"default={int(readers.default_readable)}"])
    return "r" + hashlib.blake2b(text.encode(), digest_size=12).hexdigest()


def of_request(request) -> common_pb2.Readers | None:
    """A request's readers (its `readers` field), None when it sets none."""
    return request.readers if request.HasField("readers") else None


# tantivy's `meta` terms of readers: `@allow=<term>`, `@deny=<principal>`, and MARKER, which every document written
# with readers holds (one without it was written before them: the collection default's)
ALLOW_KEY, DENY_KEY, MARKER = "@allow", "@deny", "@acl"


def acl_payload(acl: common_pb2.Acl) -> dict:
    """The payload fields a store keeps of a chunk's readers."""
    return {ALLOW: allow_terms(acl), DENY: deny_terms(acl)}


def same_readers(p: dict, acl: common_pb2.Acl) -> bool:
    """Whether a stored payload has these readers (one written before readers were kept has the default's)."""
    return p.get(ALLOW, [DEFAULT]) == allow_terms(acl) and p.get(DENY, []) == deny_terms(acl)


def acl_of(p: dict) -> common_pb2.Acl | None:
    """The acl a stored payload keeps (None: the collection's default, no deny)."""
    allow = [t for t in p.get(ALLOW, ()) if t != DEFAULT]
    deny = list(p.get(DENY, ()))
    return common_pb2.Acl(allow=allow, deny=deny) if allow or deny else None


def payload_readable(readers: common_pb2.Readers | None, p: dict) -> bool:
    return readable(readers, p.get(ALLOW, [DEFAULT]), p.get(DENY, ()))


def readers_key_of(acl: common_pb2.Acl) -> str:
    """A short name of a document's stored readers (OpenSearch keeps it to tell a new acl from the stored one)."""
    text = "\n".join([*allow_terms(acl), "!", *deny_terms(acl)])
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()
