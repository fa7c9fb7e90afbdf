"""API keys: the key format, hashing, the keys file and the permission rules (pure logic, no server)."""

from __future__ import annotations

import hashlib
import stat

import pytest

from hybridsearch.security.apikeys import (
    AuthError,
    KeyEntry,
    KeyFileError,
    KeyStore,
    authenticate,
    authorize,
    client_key,
    create_key,
    ensure_local_admin,
    hash_key,
    matches,
    new_key,
    parse_keys,
)

DIGEST = "a" * 64


def test_a_new_key_is_random_and_only_its_sha256_is_kept(tmp_path):
    key, key_id = new_key()
    assert key.startswith(f"hs_{key_id}_") and len(key) == 3 + 8 + 1 + 43
    assert new_key()[0] != key
    assert hash_key(key) == hashlib.sha256(key.encode()).hexdigest()
    made, entry = create_key(tmp_path / "keys.yaml", "team-a", ["team-a-*"], ["team-a-docs"])
    text = (tmp_path / "keys.yaml").read_text()
    assert made not in text and made.split("_", 2)[2] not in text
    assert entry.sha256 in text
    assert stat.S_IMODE((tmp_path / "keys.yaml").stat().st_mode) == 0o600


def test_keys_are_appended_and_parse_back(tmp_path):
    path = tmp_path / "keys.yaml"
    first, a = create_key(path, "team-a", ["team-a-*"], [])
    second, b = create_key(path, "team-b", ["team-b"], ["team-b"])
    entries = parse_keys(path.read_text())
    assert set(entries) == {a.id, b.id}
    assert authenticate(entries, f"Bearer {first}").tenant == "team-a"
    assert authenticate(entries, f"bearer  {second} ").tenant == "team-b"


def test_a_json_keys_file_is_accepted():
    text = '{"keys": [{"id": "0123abcd", "tenant": "t", "sha256": "%s", "read": "x,y-*"}]}' % DIGEST
    entry = parse_keys(text)["0123abcd"]
    assert entry.read == ("x", "y-*") and entry.write == () and entry.role == "tenant"


@pytest.mark.parametrize("text,message", [
    ("keys: [1]", "is a mapping"),
    ("- a\n- b", "a list under 'keys'"),
    ("keys: {a: 1}", "a list under 'keys'"),
    ("keys: [{id: xyz, tenant: t, sha256: %s}]" % DIGEST, "8 hex digits"),
    ("keys: [{id: 0123abcd, tenant: '', sha256: %s}]" % DIGEST, "tenant must be"),
    ("keys: [{id: 0123abcd, tenant: t, sha256: hs_0123abcd_plaintext}]", "never the key"),
    ("keys: [{id: 0123abcd, tenant: t, sha256: %s, role: root}]" % DIGEST, "role must be"),
    ("keys: [{id: 0123abcd, tenant: t, sha256: %s, read: ['a*b']}]" % DIGEST, "prefix ending in '*'"),
    ("keys: [{id: 0123abcd, tenant: t, sha256: %s, write: ['Team']}]" % DIGEST, "not a collection name"),
    ("keys: [{id: 0123abcd, tenant: t, sha256: %s, key: x}]" % DIGEST, "unknown fields"),
    ("keys: [{id: 0123abcd, tenant: t, sha256: %s}, {id: 0123abcd, tenant: u, sha256: %s}]" % (DIGEST, DIGEST), "twice"),
    ("keys: [unclosed", "not YAML/JSON"),
])
def test_an_invalid_keys_file_says_what_is_wrong(text, message):
    with pytest.raises(KeyFileError, match=message):
        parse_keys(text)


@pytest.mark.parametrize("pattern,collection,expected", [
    ("docs", "docs", True),
    ("docs", "docs2", False),
    ("team-a-*", "team-a-docs", True),
    ("team-a-*", "team-a-", True),
    ("team-a-*", "team-b-docs", False),
    ("team-a-*", "team-a", False),
    ("*", "anything", True),
])
def test_collection_patterns(pattern, collection, expected):
    assert matches(pattern, collection) is expected


TENANT = KeyEntry("0123abcd", "team-a", DIGEST, "tenant", read=("team-a-*", "shared"), write=("team-a-docs",))
ADMIN = KeyEntry("89abcdef", "ops", DIGEST, "admin")


@pytest.mark.parametrize("entry,operation,collection,allowed", [
    (TENANT, "read", "team-a-docs", True),
    (TENANT, "read", "team-a-wiki", True),
    (TENANT, "read", "shared", True),
    (TENANT, "read", "team-b-docs", False),
    (TENANT, "write", "team-a-docs", True),
    (TENANT, "write", "team-a-wiki", False),  # write is granted by name only
    (TENANT, "write", "shared", False),  # read does not imply write
    (KeyEntry("0123abcd", "w", DIGEST, write=("w",)), "read", "w", False),  # nor write read
    (ADMIN, "read", "team-b-docs", True),
    (ADMIN, "write", "default", True),
])
def test_permission_rules(entry, operation, collection, allowed):
    if allowed:
        authorize(entry, operation, collection)
    else:
        with pytest.raises(AuthError) as refused:
            authorize(entry, operation, collection)
        assert refused.value.code == "permission_denied"
        assert f"may not {operation} collection {collection!r}" in str(refused.value)


@pytest.mark.parametrize("header,message", [
    (None, "missing API key"),
    ("", "missing API key"),
    ("Basic dXNlcjpwYXNz", "expected 'Bearer <key>'"),
    ("Bearer", "expected 'Bearer <key>'"),
    ("Bearer not-a-key", "malformed API key"),
    ("Bearer hs_0123abcd_" + "x" * 43, "invalid API key"),  # right id, wrong secret
    ("Bearer hs_ffffffff_" + "x" * 43, "invalid API key"),  # unknown id
])
def test_unauthenticated(header, message):
    key, key_id = new_key()
    entries = {key_id: KeyEntry(key_id, "t", hash_key(key))}
    if header and "0123abcd" in header:
        entries["0123abcd"] = KeyEntry("0123abcd", "t", DIGEST)
    with pytest.raises(AuthError, match=message) as refused:
        authenticate(entries, header)
    assert refused.value.code == "unauthenticated"
    assert authenticate(entries, f"Bearer {key}").id == key_id


def test_the_store_rereads_a_changed_file_and_fails_closed_without_one(tmp_path):
    path = tmp_path / "keys.yaml"
    store = KeyStore(path)
    with pytest.raises(KeyFileError, match="missing"):
        store.entries()
    key, entry = create_key(path, "a", ["a"], [])
    assert set(store.entries()) == {entry.id}
    _, later = create_key(path, "b", ["b"], [])
    assert set(store.entries()) == {entry.id, later.id}


def test_local_admin_key_is_made_once_and_found_by_clients(tmp_path, monkeypatch):
    keys_file, admin_file = ensure_local_admin(tmp_path / "auth")
    key = admin_file.read_text().strip()
    assert stat.S_IMODE(admin_file.stat().st_mode) == 0o600
    assert authenticate(parse_keys(keys_file.read_text()), f"Bearer {key}").role == "admin"
    ensure_local_admin(tmp_path / "auth")
    assert admin_file.read_text().strip() == key and len(parse_keys(keys_file.read_text())) == 1
    assert client_key(tmp_path) == key
    assert client_key(tmp_path, "hs_override") == "hs_override"
    assert client_key(tmp_path / "elsewhere") is None
