"""Sealed at rest (security/sealing.py): the keys file, AES-GCM seal/open bound to collection and chunk, keyed
hashes for metadata, tags, filters and the tag leg's keywords; pure logic, no server."""

from __future__ import annotations

import base64
import stat

import grpc
import pytest
import yaml

from hybridsearch.config.collections import CollectionConfig
from hybridsearch.config.settings import Settings
from hybridsearch.security.keys_file import (
    CollectionKey,
    CollectionKeys,
    KeysFile,
    adopt_keys,
    create_collection_key,
    destroy_keys,
    finish_rotation,
    keys_path,
    parse_keys_file,
    retire_key,
    start_rotation,
)
from hybridsearch.security.sealing import CollectionSeal, Sealer, SealingError
from hybridsearch.text.tags import query_keywords, split_tags
from hybridsearch.v1 import common_pb2

CONFIG = CollectionConfig(sealed=True, tags_field="topics", fields={"summary": 2.0})


def settings_for(tmp_path, **collections) -> Settings:
    return Settings(data_dir=tmp_path, collections=collections or {"notes": CONFIG})


@pytest.fixture
def seal(tmp_path) -> CollectionSeal:
    settings = settings_for(tmp_path)
    create_collection_key(keys_path(settings), "notes")
    return Sealer(settings).of("notes")


def chunk(**over) -> common_pb2.Chunk:
    fields = dict(chunk_id="d1#0", doc_id="d1", position=0, title="Quarzelbrot title", heading="# Heading",
                  text="the zyxquorble passage", metadata={"topics": "Alpha, beta", "type": "decision",
                                                           "summary": "short flumbrix"},
                  content_hash="c" * 16, written_at_ms=5)
    return common_pb2.Chunk(**{**fields, **over})


def test_create_key_makes_a_private_file_with_a_256_bit_key_and_refuses_a_second(tmp_path):
    path = tmp_path / "sealing" / "keys.yaml"
    key_id = create_collection_key(path, "notes")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    raw = yaml.safe_load(path.read_text())["collections"]["notes"]
    assert raw["active"] == key_id and len(base64.b64decode(raw["keys"][key_id])) == 32
    with pytest.raises(ValueError, match="already has a key"):
        create_collection_key(path, "notes")
    assert create_collection_key(path, "other") != key_id


def test_a_key_never_shows_in_a_repr(seal, tmp_path):
    secret = yaml.safe_load((tmp_path / "sealing" / "keys.yaml").read_text())["collections"]["notes"]["keys"]
    secret = secret[seal.keys.active]
    for shown in (repr(seal), repr(seal.active), repr(seal.keys), str(seal.active)):
        assert secret not in shown and seal.active.seal_key.hex() not in shown and "seal_key=" not in shown


def test_seal_and_open_round_trip_and_the_blob_holds_no_clear_text(seal):
    sealed = seal.seal_chunk(chunk())
    assert sealed.sealed.key_id == seal.keys.active
    assert b"zyxquorble" not in sealed.sealed.blob and b"Quarzelbrot" not in sealed.sealed.blob
    opened = seal.open_content("d1#0", sealed.sealed)
    assert (opened.title, opened.heading, opened.text) == ("Quarzelbrot title", "# Heading", "the zyxquorble passage")
    assert dict(opened.metadata) == dict(chunk().metadata)
    # the clear fields still travel to the stores, to be indexed (never stored)
    assert sealed.text == "the zyxquorble passage" and sealed.title == "Quarzelbrot title"
    assert dict(sealed.indexed_metadata) == {"summary": "short flumbrix"}
    assert "decision" not in sealed.metadata.values() and sealed.metadata["type"] == seal.hash_value("type", "decision")
    assert sealed.content_hash != chunk().content_hash
    assert seal.open_chunk(sealed).text == "the zyxquorble passage" and not seal.open_chunk(sealed).HasField("sealed")


def test_a_record_moved_to_another_chunk_or_collection_does_not_open(seal, tmp_path):
    sealed = seal.seal_chunk(chunk()).sealed
    with pytest.raises(SealingError, match="does not open") as err:
        seal.open("d2#0", sealed)
    assert err.value.code == grpc.StatusCode.FAILED_PRECONDITION
    other = CollectionSeal("other", seal.keys, CONFIG)  # the same key, another collection
    with pytest.raises(SealingError, match="does not open"):
        other.open("d1#0", sealed)
    tampered = common_pb2.Sealed(blob=sealed.blob[:-1] + bytes([sealed.blob[-1] ^ 1]), key_id=sealed.key_id)
    with pytest.raises(SealingError, match="damaged"):
        seal.open("d1#0", tampered)


def test_a_wrong_or_missing_key_is_a_clear_failed_precondition(tmp_path, seal):
    sealed = seal.seal_chunk(chunk()).sealed
    with pytest.raises(SealingError, match="not in the keys file"):
        seal.open("d1#0", common_pb2.Sealed(blob=sealed.blob, key_id="00000000"))
    # a key file where the same id holds another key: the record does not open, no garbage comes out
    path = tmp_path / "sealing" / "keys.yaml"
    raw = yaml.safe_load(path.read_text())
    raw["collections"]["notes"]["keys"][sealed.key_id] = base64.b64encode(b"k" * 32).decode()
    path.write_text(yaml.safe_dump(raw))
    with pytest.raises(SealingError, match="does not open with key"):
        Sealer(settings_for(tmp_path)).of("notes").open("d1#0", sealed)
    # no key at all for a sealed collection
    with pytest.raises(SealingError, match="has no key .* keys create -c nokey") as err:
        Sealer(settings_for(tmp_path, nokey=CONFIG)).of("nokey")
    assert err.value.code == grpc.StatusCode.FAILED_PRECONDITION
    # a collection that is not sealed has no seal, key or not
    assert Sealer(settings_for(tmp_path, notes=CollectionConfig())).of("notes") is None


def test_hashes_are_keyed_per_field_and_tags_hash_tag_by_tag(seal, tmp_path):
    assert seal.hash_value("type", "decision") == seal.hash_value("type", "decision")
    assert seal.hash_value("type", "decision") != seal.hash_value("status", "decision")
    other = tmp_path / "other.yaml"
    create_collection_key(other, "notes")
    again = Sealer(settings_for(tmp_path), other).of("notes")
    assert again.hash_value("type", "decision") != seal.hash_value("type", "decision")  # another key, other hashes
    stored = seal.hash_value("topics", "Alpha, beta")
    assert split_tags(stored) == [seal.digest("tag", "alpha"), seal.digest("tag", "beta")]
    # the tag leg's keywords hashed the same way match the stored tags exactly
    sent = query_keywords(seal.tag_query("what about beta"))
    assert seal.digest("tag", "beta") in sent and set(split_tags(stored)) & set(sent) == {seal.digest("tag", "beta")}


def test_digests_hash_under_every_key_the_active_one_first(seal):
    assert seal.digests("term", "harbour") == [seal.digest("term", "harbour")]  # one key: its digest
    old = CollectionKey.from_secret("0ld0ld00", b"o" * 32)
    rotating = CollectionSeal("notes", CollectionKeys(seal.keys.active, {**seal.keys.keys, old.key_id: old}), CONFIG)
    digests = rotating.digests("term", "harbour")
    assert digests[0] == seal.digest("term", "harbour") and len(set(digests)) == 2
    retired = CollectionSeal("notes", CollectionKeys(old.key_id, rotating.keys.keys), CONFIG)
    assert retired.digests("term", "harbour") == digests[::-1]


def test_filters_are_hashed_like_the_stored_values(seal):
    filters = [common_pb2.MetadataFilter(field="type", equals="decision"),
               common_pb2.MetadataFilter(field="type", any_of=common_pb2.StringList(values=["a", "decision"])),
               common_pb2.MetadataFilter(field="topics", not_equals="alpha,beta")]
    hashed = seal.hashed_filters(filters)
    stored = seal.seal_chunk(chunk()).metadata
    assert hashed[0].equals == stored["type"] and stored["type"] in hashed[1].any_of.values
    assert hashed[2].not_equals == stored["topics"]


def test_the_keys_file_is_reread_when_it_changes_and_a_bad_one_names_the_entry(tmp_path):
    path = tmp_path / "keys.yaml"
    keys = KeysFile(path)
    assert keys.collection("notes") is None  # no file: no key
    create_collection_key(path, "notes")
    assert keys.collection("notes") is not None and keys.collection("other") is None
    create_collection_key(path, "other")
    assert keys.collection("other") is not None
    with pytest.raises(ValueError, match="'notes' key k1: not base64 of 32 bytes"):
        parse_keys_file(yaml.safe_dump({"collections": {"notes": {"active": "k1", "keys": {"k1": "c2hvcnQ="}}}}), "f")
    with pytest.raises(ValueError, match="active key 'k2' is not among its keys"):
        parse_keys_file(yaml.safe_dump({"collections": {"notes": {"active": "k2", "keys": {}}}}), "f")


def test_reconcile_copies_a_sealed_record_with_its_texts_opened_to_index(seal):
    stored = seal.seal_chunk(chunk())
    for name in ("title", "heading", "text"):  # what a store gives back: the record, no texts
        stored.ClearField(name)
    stored.indexed_metadata.clear()
    copy = seal.copyable(stored)
    assert (copy.title, copy.text) == ("Quarzelbrot title", "the zyxquorble passage")
    assert copy.sealed == stored.sealed and copy.content_hash == stored.content_hash  # not hashed a second time
    assert dict(copy.metadata) == dict(stored.metadata) and dict(copy.indexed_metadata) == {"summary": "short flumbrix"}


def rotated(tmp_path) -> tuple[CollectionSeal, CollectionSeal]:
    """(the collection's seal before a rotation, the seal once it has begun): two keys, the new one active."""
    settings = settings_for(tmp_path)
    create_collection_key(keys_path(settings), "notes")
    before = Sealer(settings).of("notes")
    start_rotation(keys_path(settings), "notes")
    return before, Sealer(settings).of("notes")


def test_during_a_rotation_queries_match_records_hashed_under_every_key(tmp_path):
    old, new = rotated(tmp_path)
    assert new.keys.key_ids == [new.keys.active, old.keys.active]  # the active key first
    assert new.digests("tag", "beta") == [new.digest("tag", "beta"), old.digest("tag", "beta")]
    under_old, under_new = old.seal_chunk(chunk()).metadata, new.seal_chunk(chunk()).metadata
    assert under_old["type"] != under_new["type"]  # hashes change with the key
    equals = new.hashed_filters([common_pb2.MetadataFilter(field="type", equals="decision")])
    any_of = new.hashed_filters([common_pb2.MetadataFilter(field="topics",
                                                           any_of=common_pb2.StringList(values=["x", "alpha,beta"]))])
    not_equals = new.hashed_filters([common_pb2.MetadataFilter(field="type", not_equals="decision")])
    for stored in (under_old, under_new):  # a record under either key is matched, and excluded
        assert stored["type"] in equals[0].any_of.values
        assert stored["topics"] in any_of[0].any_of.values
        assert stored["type"] in {f.not_equals for f in not_equals}
    assert len(not_equals) == 2 and len(any_of[0].any_of.values) == 4
    sent = set(query_keywords(new.tag_query("what about beta")))
    for stored in (under_old, under_new):  # the tag leg's keywords meet the tags under either key
        assert set(split_tags(stored["topics"])) & sent
    assert new.hash_values("type", "decision") == [under_new["type"], under_old["type"]]
    # a collection with one key hashes as before: one value, equals stays equals
    assert old.hashed_filters([common_pb2.MetadataFilter(field="type", equals="decision")])[0].equals == \
        under_old["type"]


def test_a_reseal_opens_under_the_old_key_and_seals_and_hashes_under_the_new(tmp_path):
    old, new = rotated(tmp_path)
    stored = old.seal_chunk(chunk())
    for name in ("title", "heading", "text"):  # what a store gives back: the record, no texts
        stored.ClearField(name)
    stored.indexed_metadata.clear()
    again = new.reseal(stored)
    assert again.sealed.key_id == new.keys.active != stored.sealed.key_id
    assert dict(again.metadata) == dict(new.seal_chunk(chunk()).metadata)  # hashed as a write under the new key
    assert again.content_hash == new.seal_chunk(chunk()).content_hash  # keyed anew from the clear hash inside
    assert (again.title, again.text, dict(again.indexed_metadata)) == (
        "Quarzelbrot title", "the zyxquorble passage", {"summary": "short flumbrix"})  # to index, never stored
    assert (again.written_at_ms, again.chunk_id, again.position) == (5, "d1#0", 0)
    assert new.open_content("d1#0", again.sealed).text == "the zyxquorble passage"


def test_rotation_marks_resumes_and_finishes_and_retire_keeps_the_active_key(tmp_path):
    path = tmp_path / "keys.yaml"
    first = create_collection_key(path, "notes")
    second, resumed = start_rotation(path, "notes")
    assert not resumed and second != first
    assert start_rotation(path, "notes") == (second, True)  # the same rotation goes on, no third key
    keys = KeysFile(path).collection("notes")
    assert (keys.active, keys.rotating, keys.key_ids) == (second, second, [second, first])
    with pytest.raises(ValueError, match="is the active key"):
        retire_key(path, "notes", second)
    finish_rotation(path, "notes", second)
    assert KeysFile(path).collection("notes").rotating == ""
    retire_key(path, "notes", first)
    assert KeysFile(path).collection("notes").key_ids == [second]
    third, resumed = start_rotation(path, "notes")  # a finished rotation: the next one makes a fresh key
    assert not resumed and third not in (first, second)
    with pytest.raises(ValueError, match="has no key 'nope'"):
        retire_key(path, "notes", "nope")


def test_destroy_leaves_a_tombstone_every_use_refuses_and_create_starts_afresh(tmp_path):
    settings = settings_for(tmp_path)
    path = keys_path(settings)
    first = create_collection_key(path, "notes")
    second, _ = start_rotation(path, "notes")
    create_collection_key(path, "other")
    from datetime import datetime, timezone

    destroyed = destroy_keys(path, "notes", datetime(2025, 1, 31, 9, 12, 3, tzinfo=timezone.utc))
    assert (destroyed.at, sorted(destroyed.key_ids)) == ("2025-01-31T09:12:03Z", sorted([first, second]))
    raw = yaml.safe_load(path.read_text())["collections"]
    assert raw["notes"] == {"destroyed": {"at": "2025-01-31T09:12:03Z", "key_ids": sorted([first, second])}}
    assert "keys" in raw["other"]  # the other collection keeps its key
    assert destroy_keys(path, "notes") == destroyed  # again: the same tombstone (the drop is retried)
    with pytest.raises(SealingError, match="collection 'notes' was erased: its key was destroyed at 2025-01-31T09:12:03Z") as err:
        Sealer(settings).of("notes")
    assert err.value.code == grpc.StatusCode.FAILED_PRECONDITION
    for refused in (lambda: start_rotation(path, "notes"), lambda: retire_key(path, "notes", first)):
        with pytest.raises(ValueError, match="was erased"):
            refused()
    fresh = create_collection_key(path, "notes")  # a fresh start of the name
    assert Sealer(settings).of("notes").keys.key_ids == [fresh] and fresh not in (first, second)


def test_adopted_keys_open_the_records_sealed_under_the_source_name_and_stay_the_adopters_own(tmp_path):
    settings = settings_for(tmp_path, notes=CONFIG, copy=CONFIG, third=CONFIG)
    path = keys_path(settings)
    create_collection_key(path, "notes")
    sealed = Sealer(settings).of("notes").seal_chunk(chunk()).sealed
    with pytest.raises(SealingError, match="has no key"):
        Sealer(settings).of("copy")
    assert adopt_keys(path, "copy", "notes") == Sealer(settings).of("notes").keys.key_ids
    copy = Sealer(settings).of("copy")
    assert copy.keys.sealed_as == "notes" and copy.open_content("d1#0", sealed).text == "the zyxquorble passage"
    fresh = copy.seal_chunk(chunk(chunk_id="d9#0")).sealed  # new records too: under the name the keys seal under
    assert copy.open_content("d9#0", fresh).title == "Quarzelbrot title"
    assert copy.hash_value("type", "decision") == Sealer(settings).of("notes").hash_value("type", "decision")
    adopt_keys(path, "third", "copy")  # an adopter's adopter seals under the first name, not the middle one
    assert Sealer(settings).of("third").keys.sealed_as == "notes"
    assert Sealer(settings).of("third").open_content("d1#0", sealed).text == "the zyxquorble passage"
    with pytest.raises(ValueError, match="already has keys"):
        adopt_keys(path, "copy", "notes")
    with pytest.raises(ValueError, match="its own keys"):
        adopt_keys(path, "notes", "notes")
    with pytest.raises(ValueError, match="has no key"):
        adopt_keys(path, "fourth", "missing")
    destroy_keys(path, "notes")  # the copy's keys are its own: the source's erasure leaves them
    assert Sealer(settings).of("copy").open_content("d1#0", sealed).text == "the zyxquorble passage"
    start_rotation(path, "copy")
    assert len(Sealer(settings).of("copy").keys.key_ids) == 2 and len(Sealer(settings).of("third").keys.key_ids) == 1
    raw = yaml.safe_load(path.read_text())["collections"]
    raw["copy"]["sealed_as"] = "Not A Name"
    with pytest.raises(ValueError, match="sealed_as"):
        parse_keys_file(yaml.safe_dump({"collections": raw}), "keys.yaml")
