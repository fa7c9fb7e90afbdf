"""Validators: names match whole (no trailing newline), metadata keys are flat, every limit is named."""

from __future__ import annotations

import pytest

from hybridsearch.contract.limits import MAX_DELETE_IDS, MAX_METADATA_BYTES, MAX_METADATA_KEYS, MAX_VALUE_CHARS
from hybridsearch.contract.validation import check_collection, check_doc_id, check_doc_ids, check_field, check_filters, check_metadata
from hybridsearch.contract.errors import InvalidArgument
from hybridsearch.v1 import common_pb2


@pytest.mark.parametrize("check,value", [
    (check_collection, "default\n"), (check_doc_id, "doc\n"), (lambda v: check_field(v, "key"), "lang\n"),
])
def test_a_trailing_newline_is_not_part_of_a_valid_name(check, value):
    check(value.rstrip("\n"))
    with pytest.raises(InvalidArgument):
        check(value)


@pytest.mark.parametrize("key", ["lang", "a-b", "A_9", "-", "0", "x" * 64])
def test_flat_keys_are_fields(key):
    assert check_field(key, "key") == key


@pytest.mark.parametrize("key", ["a.b", ".a", "a.", "a..b", "", "x" * 65, "a b", "a[]", "é"])
def test_dotted_and_other_keys_are_refused(key):
    with pytest.raises(InvalidArgument, match="no '.'"):
        check_field(key, "key")


def test_metadata_limits_are_named():
    check_metadata({"lang": "en", "k": "v" * MAX_VALUE_CHARS}, "doc")
    cases = [
        ({f"k{i}": "v" for i in range(MAX_METADATA_KEYS + 1)}, f"the limit is {MAX_METADATA_KEYS}"),
        ({"k": "v" * (MAX_VALUE_CHARS + 1)}, f"the limit is {MAX_VALUE_CHARS}"),
        ({f"k{i}": "v" * MAX_VALUE_CHARS for i in range(9)}, f"the limit is {MAX_METADATA_BYTES}"),
        ({"a.b": "v"}, "metadata key 'a.b' is invalid"),
    ]
    for metadata, message in cases:
        with pytest.raises(InvalidArgument, match=None) as err:
            check_metadata(metadata, "documents[0] ('d')")
        assert message in str(err.value) and "documents[0]" in str(err.value)


def test_filters_follow_the_same_key_rule_and_value_limit():
    check_filters([common_pb2.MetadataFilter(field="a-b", equals="x")])
    for bad in (common_pb2.MetadataFilter(field="a.b", equals="x"),
                common_pb2.MetadataFilter(field="k", equals="x" * (MAX_VALUE_CHARS + 1))):
        with pytest.raises(InvalidArgument):
            check_filters([bad])


def test_delete_ids_are_bounded():
    assert check_doc_ids(["a", "b"]) == ["a", "b"]
    with pytest.raises(InvalidArgument, match=f"at most {MAX_DELETE_IDS}"):
        check_doc_ids(["a"] * (MAX_DELETE_IDS + 1))
