"""Request validation shared by servers: bad input becomes INVALID_ARGUMENT with a message."""

from __future__ import annotations

import re
from collections.abc import Iterable

import grpc

from hybridsearch.v1 import common_pb2

FIELD_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
COLLECTION_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")
DOC_ID = re.compile(r"^[^#\s]{1,256}$")
MAX_FILTERS = 16
MAX_FILTER_VALUES = 256
MAX_FILTER_VALUE_CHARS = 1024


class InvalidArgument(ValueError):
    """Raised by validators; servicers turn it into INVALID_ARGUMENT (or the `code` it carries)."""

    code = grpc.StatusCode.INVALID_ARGUMENT


def check_collection(name: str) -> str:
    name = name or "default"
    if not COLLECTION_NAME.match(name):
        raise InvalidArgument(
            f"collection {name[:80]!r} is invalid: use 1-63 lowercase letters, digits, '-' or '_'"
        )
    return name


def check_doc_id(doc_id: str) -> str:
    if not DOC_ID.match(doc_id):
        raise InvalidArgument(
            f"document id {doc_id[:80]!r} is invalid: 1-256 characters, no whitespace and no '#'"
        )
    return doc_id


def check_filters(filters: Iterable[common_pb2.MetadataFilter]) -> list[common_pb2.MetadataFilter]:
    out = list(filters)
    if len(out) > MAX_FILTERS:
        raise InvalidArgument(f"at most {MAX_FILTERS} filters are allowed, got {len(out)}")
    for i, f in enumerate(out):
        if not FIELD_NAME.match(f.field):
            raise InvalidArgument(
                f"filters[{i}].field {f.field[:80]!r} is invalid: 1-64 characters of [A-Za-z0-9_.-]"
            )
        which = f.WhichOneof("condition")
        if which is None:
            raise InvalidArgument(f"filters[{i}] on {f.field!r} has no condition (equals, any_of or not_equals)")
        values = list(f.any_of.values) if which == "any_of" else [getattr(f, which)]
        if which == "any_of" and not values:
            raise InvalidArgument(f"filters[{i}].any_of on {f.field!r} is empty")
        if len(values) > MAX_FILTER_VALUES:
            raise InvalidArgument(f"filters[{i}].any_of has more than {MAX_FILTER_VALUES} values")
        if any(len(v) > MAX_FILTER_VALUE_CHARS for v in values):
            raise InvalidArgument(f"filters[{i}] has a value longer than {MAX_FILTER_VALUE_CHARS} characters")
    return out


def matches_filters(metadata: dict[str, str], filters: Iterable[common_pb2.MetadataFilter]) -> bool:
    """Reference semantics of a filter list, used by the embedded engines."""
    for f in filters:
        which = f.WhichOneof("condition")
        value = metadata.get(f.field)
        if which == "equals" and value != f.equals:
            return False
        if which == "any_of" and value not in f.any_of.values:
            return False
        if which == "not_equals" and value == f.not_equals:
            return False
    return True


async def abort_invalid(context: grpc.aio.ServicerContext, err: Exception) -> None:
    await context.abort(getattr(err, "code", grpc.StatusCode.INVALID_ARGUMENT), str(err))
