"""Which collections a public request touches: one table, read by the gateway's access check (auth.py).

Each field of a public request message that can name a collection is a row of SCOPE: the message, the
field, and how the field names collections (Naming). `collections_of(request)` reads every row of the
request's message, and of the messages nested in it that have rows, and returns each collection once.
A request message without an entry is Unscoped (the access check refuses it: fail closed); an entry
with no rows says the message names no collection.

tests/gateway/access/test_scope.py walks the input message of every public method, through its nested
messages, and fails on a field that looks as if it could name a collection (NAMING_HINTS) but has no row
(uncovered_fields): a field added later cannot slip past the access check unnoticed.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import lru_cache

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

from hybridsearch.contract.validation import check_collection, split_generation
from hybridsearch.contract.errors import InvalidArgument
from hybridsearch.gateway.query.paging import token_collections


class Naming(enum.Enum):
    NAME = "name"              # one collection name; empty means `default` (validation.check_collection)
    NAMES = "names"            # a repeated string: each element a collection name, none empty
    PAGE_TOKEN = "page_token"  # a page token: the collections its first page searched (paging.token_collections)


@dataclass(frozen=True)
class Field:
    """A field of a request message that names collections, and how."""

    name: str
    naming: Naming
    # NAME only: a sibling NAMES field; while it names collections an empty value names nothing (the
    # search's primary collection is then the first of them: contract/validation.py check_search_collections).
    empty_unless: str = ""


SCOPE: dict[str, tuple[Field, ...]] = {
    "hybridsearch.v1.SearchRequest": (
        Field("collection", Naming.NAME, empty_unless="collections"),
        Field("collections", Naming.NAMES),
        Field("page_token", Naming.PAGE_TOKEN),
    ),
    "hybridsearch.v1.UpsertRequest": (Field("collection", Naming.NAME),),
    "hybridsearch.v1.DeleteRequest": (Field("collection", Naming.NAME),),
    "hybridsearch.v1.StatsRequest": (Field("collection", Naming.NAME),),
    "hybridsearch.v1.GetDocumentsRequest": (Field("collection", Naming.NAME),),
    "hybridsearch.v1.ListCollectionsRequest": (),  # names none: the servicer lists only what the key may read
    "hybridsearch.v1.DropCollectionRequest": (Field("collection", Naming.NAME),),
    # Snapshots (admin only): the collection named, and the name a restore writes into (empty: the snapshot's).
    "hybridsearch.v1.CreateSnapshotRequest": (Field("collection", Naming.NAME),),
    "hybridsearch.v1.ListSnapshotsRequest": (Field("collection", Naming.NAME),),
    "hybridsearch.v1.RestoreSnapshotRequest": (Field("collection", Naming.NAME),),
    "hybridsearch.v1.DeleteSnapshotRequest": (),  # a location: admin keys may touch every collection
    # Aliases and re-indexing (admin only).
    "hybridsearch.v1.GetAliasRequest": (Field("collection", Naming.NAME),),
    "hybridsearch.v1.ListAliasesRequest": (),  # admin keys read every collection
    "hybridsearch.v1.ReindexRequest": (Field("collection", Naming.NAME),),
    "hybridsearch.v1.SwitchAliasRequest": (Field("collection", Naming.NAME),),
    "hybridsearch.v1.RollbackAliasRequest": (Field("collection", Naming.NAME),),
    "hybridsearch.v1.DropGenerationRequest": (Field("collection", Naming.NAME),),
}

# A field whose name matches this may name a collection: it needs a row in SCOPE (the descriptor test).
NAMING_HINTS = re.compile(r"collection|page_token")


class Unscoped(LookupError):
    """A request message SCOPE has no entry for: which collections it touches is unknown."""


def _name(message: Message, field: Field) -> list[str]:
    value = getattr(message, field.name)
    if not value and field.empty_unless and len(getattr(message, field.empty_unless)):
        return []
    return [check_collection(value)]


def _names(message: Message, field: Field) -> list[str]:
    values = list(getattr(message, field.name))
    if "" in values:
        raise InvalidArgument(f"{field.name} has an empty name")
    return [check_collection(value) for value in values]


def _page_token(message: Message, field: Field) -> list[str]:
    names = token_collections(getattr(message, field.name))
    if "" in names:
        raise InvalidArgument(f"{field.name} names an empty collection")
    try:
        return [check_collection(name) for name in names]
    except InvalidArgument as err:
        raise InvalidArgument(f"{field.name}: {err}") from None


READERS: dict[Naming, Callable[[Message, Field], list[str]]] = {
    Naming.NAME: _name,
    Naming.NAMES: _names,
    Naming.PAGE_TOKEN: _page_token,
}


def collections_of(message: Message) -> tuple[str, ...]:
    """Every collection `message` touches, each once, in the order its fields name them; a generation
    (`notes.g2`, gateway/resources/aliases.py) as its alias, whose data it holds. InvalidArgument for a name that is no
    collection name, Unscoped for a message SCOPE does not know."""
    if message.DESCRIPTOR.full_name not in SCOPE:
        raise Unscoped(f"no collection rule for {message.DESCRIPTOR.full_name}")
    return tuple(dict.fromkeys(split_generation(name)[0] for name in _named(message)))


def _named(message: Message) -> Iterator[str]:
    for field in SCOPE.get(message.DESCRIPTOR.full_name, ()):
        yield from READERS[field.naming](message, field)
    for field in _scoped_children(message.DESCRIPTOR):
        for child in _values(message, field):
            yield from _named(child)


def _values(message: Message, field: FieldDescriptor) -> list[Message]:
    """The messages a message-typed field holds: the map's values, the list, or the one when it is set."""
    value = getattr(message, field.name)
    if _is_map(field):
        return list(value.values())
    if field.is_repeated:
        return list(value)
    return [value] if message.HasField(field.name) else []


def _is_map(field: FieldDescriptor) -> bool:
    return field.message_type is not None and field.message_type.GetOptions().map_entry


def _nested(field: FieldDescriptor) -> Descriptor | None:
    """The message type a field holds (a map's value type), None for scalars and scalar maps."""
    if field.message_type is None:
        return None
    if _is_map(field):
        return field.message_type.fields_by_name["value"].message_type
    return field.message_type


@lru_cache(maxsize=None)
def _scoped_children(descriptor: Descriptor) -> tuple[FieldDescriptor, ...]:
    """The message-typed fields of `descriptor` through which a message with rows in SCOPE can be reached
    (none today: reading a request costs nothing for its nested documents and filters)."""
    return tuple(f for f in descriptor.fields if (t := _nested(f)) is not None and _reaches_scope(t, frozenset()))


def _reaches_scope(descriptor: Descriptor, seen: frozenset[str]) -> bool:
    if descriptor.full_name in seen:
        return False
    if SCOPE.get(descriptor.full_name):
        return True
    seen = seen | {descriptor.full_name}
    return any((t := _nested(f)) is not None and _reaches_scope(t, seen) for f in descriptor.fields)


def uncovered_fields(descriptor: Descriptor) -> list[str]:
    """`Message.field` for every field of `descriptor` and of the messages nested in it whose name looks as
    if it could name a collection (NAMING_HINTS) but that has no row in SCOPE."""
    found: list[str] = []
    _walk(descriptor, set(), found)
    return found


def _walk(descriptor: Descriptor, seen: set[str], found: list[str]) -> None:
    if descriptor.full_name in seen:
        return
    seen.add(descriptor.full_name)
    covered = {f.name for f in SCOPE.get(descriptor.full_name, ())}
    for field in descriptor.fields:
        if NAMING_HINTS.search(field.name) and field.name not in covered:
            found.append(f"{descriptor.full_name}.{field.name}")
        if (nested := _nested(field)) is not None:
            _walk(nested, seen, found)
