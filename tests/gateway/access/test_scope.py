"""Which collections a request touches (gateway/access/scope.py): the descriptor walk that keeps the table
complete as the API grows, and the reading of each kind of field."""

from __future__ import annotations

import importlib
import pkgutil

import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from hypothesis import given
from hypothesis import strategies as st

import hybridsearch.v1
from hybridsearch.contract.errors import InvalidArgument
from hybridsearch.gateway.access.auth import METHOD_OPERATIONS, PUBLIC_SERVICES
from hybridsearch.config.settings import Settings
from hybridsearch.gateway.query.request import plan_search
from hybridsearch.gateway.query.paging import PageTokens, request_digest
from hybridsearch.gateway.access.scope import SCOPE, Naming, Unscoped, collections_of, uncovered_fields
from hybridsearch.v1 import aliases_pb2, collections_pb2, common_pb2, ingest_pb2, search_pb2, snapshots_pb2


def digest(request: search_pb2.SearchRequest) -> str:
    """The page digest of a request as the gateway makes it: over the collections its plan names."""
    shape = search_pb2.SearchRequest(query=request.query, collection=request.collection, collections=request.collections)
    return request_digest(request, plan_search(shape, Settings()).requested)


def public_methods():
    """Every method of every service in hybridsearch.v1 that the gateway serves publicly (auth.PUBLIC_SERVICES)."""
    for info in pkgutil.iter_modules(hybridsearch.v1.__path__):
        if not info.name.endswith("_pb2"):
            continue
        module = importlib.import_module(f"hybridsearch.v1.{info.name}")
        for service in module.DESCRIPTOR.services_by_name.values():
            if f"/{service.full_name}/" in PUBLIC_SERVICES:
                yield from service.methods


METHODS = list(public_methods())


def test_the_walk_finds_every_public_service_and_each_method_has_an_access_rule():
    assert {m.containing_service.name for m in METHODS} == {"SearchService", "IngestService", "CollectionService",
                                                            "SnapshotService", "AliasService"}
    assert {f"/{m.containing_service.full_name}/{m.name}" for m in METHODS} == set(METHOD_OPERATIONS)


@pytest.mark.parametrize("method", METHODS, ids=lambda m: m.name)
def test_every_field_that_could_name_a_collection_is_in_the_table(method):
    assert method.input_type.full_name in SCOPE, f"{method.input_type.full_name} has no entry in scope.SCOPE"
    assert uncovered_fields(method.input_type) == []


def test_the_walk_reports_a_field_the_table_does_not_cover():
    # SearchHit names its collection and is no request: the walker must see it, however deep it sits.
    assert uncovered_fields(search_pb2.SearchHit.DESCRIPTOR) == ["hybridsearch.v1.SearchHit.collection"]
    found = uncovered_fields(search_pb2.SearchResponse.DESCRIPTOR)
    assert {"hybridsearch.v1.SearchHit.collection", "hybridsearch.v1.AppliedBoost.collection",
            "hybridsearch.v1.SearchResponse.next_page_token"} <= set(found)


def synthetic_request() -> type:
    """A request message as someone might add one: a nested message with a `source_collection` field, a
    map of such messages and a `resume_page_token`, none of them in the table."""
    proto = descriptor_pb2.FileDescriptorProto(name="synthetic_scope.proto", package="synthetic", syntax="proto3")
    inner = proto.message_type.add(name="Target")
    inner.field.add(name="source_collection", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
                    label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
    outer = proto.message_type.add(name="CopyRequest")
    outer.field.add(name="target", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE,
                    type_name=".synthetic.Target", label=descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED)
    outer.field.add(name="resume_page_token", number=2, type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
                    label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
    entry = outer.nested_type.add(name="ByNameEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
                    label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
    entry.field.add(name="value", number=2, type=descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE,
                    type_name=".synthetic.Target", label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
    outer.field.add(name="by_name", number=3, type=descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE,
                    type_name=".synthetic.CopyRequest.ByNameEntry",
                    label=descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("synthetic.CopyRequest"))


def test_a_new_uncovered_field_fails_the_walk():
    request = synthetic_request()
    assert sorted(uncovered_fields(request.DESCRIPTOR)) == ["synthetic.CopyRequest.resume_page_token",
                                                            "synthetic.Target.source_collection"]
    with pytest.raises(Unscoped, match="synthetic.CopyRequest"):
        collections_of(request())


def test_rows_of_nested_messages_are_read_through_lists_and_maps(monkeypatch):
    from hybridsearch.gateway.access import scope

    request_type = synthetic_request()
    monkeypatch.setitem(SCOPE, "synthetic.CopyRequest", ())
    monkeypatch.setitem(SCOPE, "synthetic.Target", (scope.Field("source_collection", Naming.NAME),))
    scope._scoped_children.cache_clear()
    try:
        request = request_type()
        request.target.add(source_collection="pa-docs")
        request.by_name["x"].source_collection = "pb-secret"
        assert collections_of(request) == ("pa-docs", "pb-secret")
        assert uncovered_fields(request_type.DESCRIPTOR) == ["synthetic.CopyRequest.resume_page_token"]
    finally:
        scope._scoped_children.cache_clear()


def test_every_row_names_a_field_of_the_right_shape():
    by_name = {d.full_name: d for m in (search_pb2, ingest_pb2, collections_pb2, snapshots_pb2, aliases_pb2)
               for d in m.DESCRIPTOR.message_types_by_name.values()}
    for message, rows in SCOPE.items():
        for row in rows:
            field = by_name[message].fields_by_name.get(row.name)
            assert field is not None, f"{message}.{row.name} does not exist"
            assert field.type == field.TYPE_STRING
            assert field.is_repeated == (row.naming is Naming.NAMES), f"{message}.{row.name}"
            if row.empty_unless:
                assert by_name[message].fields_by_name[row.empty_unless].is_repeated


# What each request names ---------------------------------------------------------------------------

TOKENS = PageTokens(b"s" * 32, ttl_s=600)


def token_of(**request) -> str:
    return TOKENS.issue("order1", 10, digest(search_pb2.SearchRequest(query="q", **request)))


@pytest.mark.parametrize("request_, names", [
    (search_pb2.SearchRequest(query="q"), ("default",)),
    (search_pb2.SearchRequest(query="q", collection="pa-docs"), ("pa-docs",)),
    # The bug of issue 23: `collections` reached another tenant's collection past the check.
    (search_pb2.SearchRequest(collection="pa-docs", collections=["pa-docs", "pb-secret"]), ("pa-docs", "pb-secret")),
    # An empty `collection` beside `collections` is not `default`: the primary is the first of them.
    (search_pb2.SearchRequest(collections=["pb-secret", "pa-docs"]), ("pb-secret", "pa-docs")),
    (search_pb2.SearchRequest(collections=["pa-docs"]), ("pa-docs",)),
    (search_pb2.SearchRequest(collection="pa-docs", page_token=token_of(collection="pb-secret")),
     ("pa-docs", "pb-secret")),
    (search_pb2.SearchRequest(collection="pa-docs", page_token=token_of(collections=["pa-x", "pb-y"])),
     ("pa-docs", "pa-x", "pb-y")),
    (search_pb2.SearchRequest(page_token=token_of()), ("default",)),
    (search_pb2.SearchRequest(collection="pa-docs", page_token="garbled"), ("pa-docs",)),  # the servicer refuses it
    (ingest_pb2.UpsertRequest(collection="pa-docs",
                              documents=[ingest_pb2.Document(id="d", metadata={"collection": "pb"})]), ("pa-docs",)),
    (ingest_pb2.UpsertRequest(), ("default",)),
    (ingest_pb2.DeleteRequest(collection="pb-secret", ids=["x"]), ("pb-secret",)),
    (ingest_pb2.StatsRequest(collection="pb-secret"), ("pb-secret",)),
])
def test_each_request_names_every_collection_it_touches(request_, names):
    assert collections_of(request_) == names


@pytest.mark.parametrize("request_, message", [
    (search_pb2.SearchRequest(collection="Not Valid"), "collection 'Not Valid' is invalid"),
    (search_pb2.SearchRequest(collections=["pa-docs", "BAD!"]), "collection 'BAD!' is invalid"),
    (search_pb2.SearchRequest(collections=["pa-docs", ""]), "collections has an empty name"),
    (ingest_pb2.DeleteRequest(collection="../etc"), "is invalid"),
])
def test_invalid_names_are_invalid_arguments(request_, message):
    with pytest.raises(InvalidArgument, match=message):
        collections_of(request_)


def test_a_forged_token_can_only_add_names():
    """The names are read without the secret: a token of another deployment still names its collections
    (the servicer refuses it afterwards), and one naming no valid collection is INVALID_ARGUMENT."""
    forged = PageTokens(b"f" * 32, ttl_s=600).issue("o", 3, "pb-secret:" + "0" * 24)
    request = search_pb2.SearchRequest(collection="pa-docs", page_token=forged)
    assert collections_of(request) == ("pa-docs", "pb-secret")
    bad = PageTokens(b"f" * 32, ttl_s=600).issue("o", 3, "Nope/..:" + "0" * 24)
    with pytest.raises(InvalidArgument, match="page_token: collection 'Nope/..' is invalid"):
        collections_of(search_pb2.SearchRequest(collection="pa-docs", page_token=bad))


def test_a_message_without_an_entry_is_unscoped():
    with pytest.raises(Unscoped, match="hybridsearch.v1.MetadataFilter"):
        collections_of(common_pb2.MetadataFilter(field="collection", equals="pb-secret"))


NAME = st.from_regex(r"[a-z0-9][a-z0-9_-]{0,20}", fullmatch=True)


@given(primary=st.one_of(st.just(""), NAME), names=st.lists(NAME, max_size=8, unique=True), paged=st.booleans(),
       token_names=st.lists(NAME, min_size=1, max_size=8, unique=True))
def test_every_name_of_a_search_is_in_its_scope_and_nothing_else(primary, names, paged, token_names):
    request = search_pb2.SearchRequest(query="q", collection=primary, collections=names)
    if paged:
        request.page_token = token_of(collections=token_names)
    scope = collections_of(request)
    expected = ({primary} if primary else set() if names else {"default"}) | set(names)
    expected |= set(token_names) if paged else set()
    assert set(scope) == expected and len(scope) == len(expected)
