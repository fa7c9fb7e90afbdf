"""API keys per tenant: the key format, the keys file (hashes only), and who may read or write what.

A key is `hs_<id>_<secret>`: `id` (8 hex digits) names the key in the file and in logs without
revealing it, `secret` is 32 random bytes (secrets.token_urlsafe). The keys file (YAML; JSON is YAML
too) holds one entry a key:

    keys:
      - id: 3f9a0c1d
        tenant: team-a
        role: tenant            # or admin: every operation on every collection
        read: [team-a-*, shared]
        write: [team-a-*]
        principals: [user:ana, group:platform]   # whom the key reads documents as (security/principals.py)
        may_act_for: ["user:*"]                  # whom it may search on behalf of (x-hybridsearch-act-for)
        sha256: <hex of sha256(key)>

Only the hash is stored. A fast hash is enough here, unlike for passwords: a key is 256 bits from
the OS's CSPRNG, so there is no dictionary to try and no brute force within reach, and salting or a
slow KDF (which protect low-entropy secrets) would only add latency to every request. Hashes are
compared with hmac.compare_digest.

Collection rules: an exact name, or a prefix wildcard ending in `*` (`team-a-*`; `*` alone is every
collection). Write does not imply read. The file is reread when it changes (mtime), so
`hybridsearch keys create` and a rotated Kubernetes Secret take effect without a restart.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import yaml

from hybridsearch.security.principals import PrincipalError, check_act_pattern, check_principal

Operation = Literal["read", "write", "admin"]  # admin: every collection, admin keys only (snapshots)
KEY_PATTERN = re.compile(r"^hs_([0-9a-f]{8})_([A-Za-z0-9_-]{43})$")
PATTERN = re.compile(r"^(\*|[a-z0-9][a-z0-9_-]{0,62}\*?)$")
TENANT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
ROLES = ("tenant", "admin")
ADMIN_KEY_FILE = "admin.key"
KEYS_FILE = "keys.yaml"


class KeyFileError(ValueError):
    """The keys file cannot be read or an entry in it is invalid."""


class AuthError(Exception):
    """A request is refused; `code` is 'unauthenticated' or 'permission_denied', the message is safe to return."""

    def __init__(self, code: Literal["unauthenticated", "permission_denied"], message: str) -> None:
        super().__init__(message)
        self.code = code


def hash_key(key: str) -> str:
    """The hex sha256 of a key, as stored in the keys file."""
    return hashlib.sha256(key.encode()).hexdigest()


def new_key() -> tuple[str, str]:
    """A fresh random key and its id."""
    key_id = secrets.token_hex(4)
    return f"hs_{key_id}_{secrets.token_urlsafe(32)}", key_id


def matches(pattern: str, collection: str) -> bool:
    """An exact collection name, or a prefix wildcard `prefix*` (`*` alone matches every collection)."""
    if pattern.endswith("*"):
        return collection.startswith(pattern[:-1])
    return pattern == collection


@dataclass(frozen=True)
class KeyEntry:
    id: str
    tenant: str
    sha256: str
    role: str = "tenant"
    read: tuple[str, ...] = ()
    write: tuple[str, ...] = ()
    principals: tuple[str, ...] = ()  # user:<name>, group:<name>: whom the key reads documents as
    may_act_for: tuple[str, ...] = ()  # principals or patterns (user:*) it may name in x-hybridsearch-act-for

    def may(self, operation: Operation, collection: str) -> bool:
        if self.role == "admin":
            return True
        if operation == "admin":
            return False
        patterns = self.read if operation == "read" else self.write
        return any(matches(p, collection) for p in patterns)

    def to_dict(self) -> dict:
        out = {"id": self.id, "tenant": self.tenant, "role": self.role, "read": list(self.read),
               "write": list(self.write), "sha256": self.sha256}
        if self.principals:
            out["principals"] = list(self.principals)
        if self.may_act_for:
            out["may_act_for"] = list(self.may_act_for)
        return out


def parse_entry(raw: object, where: str) -> KeyEntry:
    if not isinstance(raw, dict):
        raise KeyFileError(f"{where}: an entry is a mapping with id, tenant, sha256, role, read, write")
    unknown = set(raw) - {"id", "tenant", "sha256", "role", "read", "write", "created", "principals", "may_act_for"}
    if unknown:
        raise KeyFileError(f"{where}: unknown fields {sorted(unknown)}")
    key_id, tenant, digest = str(raw.get("id", "")), str(raw.get("tenant", "")), str(raw.get("sha256", ""))
    role = str(raw.get("role", "tenant"))
    if not re.fullmatch(r"[0-9a-f]{8}", key_id):
        raise KeyFileError(f"{where}: id must be 8 hex digits, got {key_id[:20]!r}")
    if not TENANT.match(tenant):
        raise KeyFileError(f"{where}: tenant must be 1-64 characters of [A-Za-z0-9_.-], got {tenant[:70]!r}")
    if not re.fullmatch(r"[0-9a-f]{64}", digest):
        raise KeyFileError(f"{where}: sha256 must be 64 hex digits (the hash of the key, never the key)")
    if role not in ROLES:
        raise KeyFileError(f"{where}: role must be one of {', '.join(ROLES)}, got {role[:20]!r}")
    rights = {}
    for op in ("read", "write"):
        patterns = raw.get(op) or []
        if isinstance(patterns, str):
            patterns = [p.strip() for p in patterns.split(",") if p.strip()]
        if not isinstance(patterns, list):
            raise KeyFileError(f"{where}: {op} is a list of collection names or prefix* patterns")
        for p in patterns:
            if not isinstance(p, str) or not PATTERN.match(p):
                raise KeyFileError(f"{where}: {op} pattern {str(p)[:70]!r} is not a collection name or a prefix ending in '*'")
        rights[op] = tuple(patterns)
    named = {}
    for field_name, check in (("principals", check_principal), ("may_act_for", check_act_pattern)):
        values = raw.get(field_name) or []
        if not isinstance(values, list):
            raise KeyFileError(f"{where}: {field_name} is a list")
        try:
            named[field_name] = tuple(dict.fromkeys(check(str(v)) for v in values))
        except PrincipalError as err:
            raise KeyFileError(f"{where}: {err}") from None
    return KeyEntry(key_id, tenant, digest, role, rights["read"], rights["write"], named["principals"],
                    named["may_act_for"])


def parse_keys(text: str, source: str = "keys file") -> dict[str, KeyEntry]:
    """Entries by key id from the file's text; an empty file holds no keys."""
    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as err:
        raise KeyFileError(f"{source}: not YAML/JSON ({type(err).__name__})") from None
    if not isinstance(data, dict) or not isinstance(data.get("keys", []), list):
        raise KeyFileError(f"{source}: expected a mapping with a list under 'keys'")
    entries: dict[str, KeyEntry] = {}
    for i, raw in enumerate(data.get("keys") or []):
        entry = parse_entry(raw, f"{source}: keys[{i}]")
        if entry.id in entries:
            raise KeyFileError(f"{source}: keys[{i}]: id {entry.id} appears twice")
        entries[entry.id] = entry
    return entries


def authenticate(entries: dict[str, KeyEntry], authorization: str | None) -> KeyEntry:
    """The entry of the key in an `authorization: Bearer <key>` value, or AuthError (unauthenticated)."""
    if not authorization:
        raise AuthError("unauthenticated", "missing API key: send gRPC metadata 'authorization: Bearer <key>'")
    scheme, _, key = authorization.strip().partition(" ")
    if scheme.lower() != "bearer" or not key.strip():
        raise AuthError("unauthenticated", "malformed authorization metadata: expected 'Bearer <key>'")
    found = KEY_PATTERN.match(key.strip())
    if found is None:
        raise AuthError("unauthenticated", "malformed API key: expected hs_<id>_<secret> as made by `hybridsearch keys create`")
    entry = entries.get(found.group(1))
    # Compare even when the id is unknown, so both failures take the same time.
    expected = entry.sha256 if entry else "0" * 64
    if not hmac.compare_digest(hash_key(key.strip()), expected) or entry is None:
        raise AuthError("unauthenticated", "invalid API key")
    return entry


def authorize(entry: KeyEntry, operation: Operation, collection: str) -> None:
    """AuthError (permission_denied) naming the collection and the operation; it says nothing about whether
    the collection exists."""
    if not entry.may(operation, collection):
        raise AuthError("permission_denied", f"API key {entry.id} (tenant {entry.tenant!r}) may not {operation} "
                                             f"collection {collection!r}")


@dataclass
class KeyStore:
    """The keys file, reread when it changes (mtime, size or inode: an atomic replace or a Secret's symlink
    swap). A file that cannot be read keeps no key valid."""

    path: Path
    _stamp: tuple[int, int, int] | None = None
    _entries: dict[str, KeyEntry] = field(default_factory=dict)

    def entries(self) -> dict[str, KeyEntry]:
        try:
            st = self.path.stat()
        except OSError:
            raise KeyFileError(f"keys file {self.path} is missing") from None
        stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
        if stamp != self._stamp:
            self._entries = parse_keys(self.path.read_text(), str(self.path))
            self._stamp = stamp
        return self._entries


def write_private(path: Path, text: str) -> None:
    """Writes a file only its owner can read (0600), atomically (a reader sees the old or the new file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)
    os.replace(tmp, path)


def create_key(keys_file: Path, tenant: str, read: list[str], write: list[str], role: str = "tenant",
               principals: list[str] = (), may_act_for: list[str] = ()) -> tuple[str, KeyEntry]:
    """Makes a key, appends its hash to the keys file (made if missing) and returns the key, shown once."""
    entries = parse_keys(keys_file.read_text(), str(keys_file)) if keys_file.exists() else {}
    key, key_id = new_key()
    while key_id in entries:
        key, key_id = new_key()
    entry = parse_entry({"id": key_id, "tenant": tenant, "role": role, "read": read, "write": write,
                         "principals": list(principals), "may_act_for": list(may_act_for), "sha256": hash_key(key)},
                        "new key")
    entries[key_id] = entry
    header = "# hybridsearch API keys: sha256 hashes only (hybridsearch keys create); docs/security.md\n"
    write_private(keys_file, header + yaml.safe_dump({"keys": [e.to_dict() for e in entries.values()]}, sort_keys=False))
    return key, entry


def local_auth_dir(data_dir: Path) -> Path:
    """Where one machine keeps its keys file and admin key."""
    return data_dir / "auth"


def ensure_local_admin(auth_dir: Path) -> tuple[Path, Path]:
    """One machine: the keys file and an admin key beside it (0600), made on first start. Returns both paths."""
    keys_file, admin_file = auth_dir / KEYS_FILE, auth_dir / ADMIN_KEY_FILE
    if not admin_file.exists():
        key, _ = create_key(keys_file, "local-admin", [], [], role="admin")
        write_private(admin_file, key + "\n")
    return keys_file, admin_file


def client_key(data_dir: Path, explicit: str | None = None) -> str | None:
    """The key a client sends: HYBRIDSEARCH_API_KEY (passed as `explicit`), else the local admin key file."""
    if explicit:
        return explicit.strip()
    try:
        return (local_auth_dir(data_dir) / ADMIN_KEY_FILE).read_text().strip() or None
    except OSError:
        return None
