"""Request validation shared by servers: bad input becomes INVALID_ARGUMENT with a message."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from hybridsearch.contract.errors import InvalidArgument

from hybridsearch.contract.limits import (
    MAX_DELETE_IDS,
    MAX_DOC_ID_CHARS,
    MAX_FILTER_VALUES,
    MAX_FILTERS,
    MAX_KEY_CHARS,
    MAX_METADATA_BYTES,
    MAX_METADATA_KEYS,
    MAX_SECTIONS,
    MAX_TEXT_CHARS,
    MAX_TITLE_CHARS,
    MAX_VALUE_CHARS,
)
from hybridsearch.v1 import common_pb2

# Every pattern is applied with fullmatch: `$` would also match before a trailing newline.
# Metadata keys and filter fields are flat: no dots, which Qdrant reads as a nested path and BM25
# as part of the key, so both stores filter a key the same way.
FIELD_NAME = re.compile(rf"[A-Za-z0-9_-]{{1,{MAX_KEY_CHARS}}}")
FIELD_RULE = f"1-{MAX_KEY_CHARS} characters of [A-Za-z0-9_-] (flat keys: no '.')"
COLLECTION_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,62}")
# A generation of an aliased collection (gateway/resources/aliases.py): `<alias>.g<N>`. No collection name holds a dot, so
# a generation's name can never be a collection's. Stores hold generations N >= 1 under that name (generation 0
# is the collection the alias was made from, held under the alias's own name); the public API reads every
# generation by it (a search or GetDocuments of `notes.g2`, to check a re-index before the switch), but writes
# go through the alias (every generation it keeps in step gets them).
GENERATION_NAME = re.compile(r"(?P<alias>[a-z0-9][a-z0-9_-]{0,62})\.g(?P<number>0|[1-9][0-9]{0,5})")
DOC_ID = re.compile(rf"[^#\s]{{1,{MAX_DOC_ID_CHARS}}}")


def check_collection(name: str) -> str:
    """A collection's name, or a generation's (`notes.g2`); empty is `default`."""
    name = name or "default"
    if not (COLLECTION_NAME.fullmatch(name) or GENERATION_NAME.fullmatch(name)):
        raise InvalidArgument(
            f"collection {name[:80]!r} is invalid: use 1-63 lowercase letters, digits, '-' or '_'"
        )
    return name


def is_collection_name(name: str) -> bool:
    """Whether a store-held name is a collection's or a generation's (anything else is not ours)."""
    return bool(COLLECTION_NAME.fullmatch(name) or GENERATION_NAME.fullmatch(name))


def split_generation(name: str) -> tuple[str, int | None]:
    """(alias, generation number) of a generation's name; (name, None) for a collection's."""
    found = GENERATION_NAME.fullmatch(name)
    return (found["alias"], int(found["number"])) if found else (name, None)


def generation_name(alias: str, number: int) -> str:
    """The stored name of an alias's generation: generation 0 is the collection the alias was made from."""
    return f"{alias}.g{number}" if number else alias


def check_written_collection(name: str) -> str:
    """A collection a write, a snapshot or a restore may name: not a generation (writes go through its alias)."""
    name = check_collection(name)
    alias, number = split_generation(name)
    if number is not None:
        raise InvalidArgument(f"collection {name!r} is generation {number} of {alias!r}: write to {alias!r} "
                              "(it keeps the generations being built or kept for a rollback in step)")
    return name


def check_search_collections(names, collection: str, limit: int) -> tuple[list[str], str]:
    """A search's `collections` (2..limit distinct valid names; one behaves as `collection`) and its primary
    collection: `collection` if set (it must be one of them), else the first."""
    names = list(names)
    if not names:
        return [], check_collection(collection)
    if len(names) > limit:
        raise InvalidArgument(f"collections names {len(names)} collections; the limit is {limit}")
    if "" in names:
        raise InvalidArgument("collections has an empty name")
    checked = [check_collection(n) for n in names]
    if len(set(checked)) != len(checked):
        doubled = sorted({n for n in checked if checked.count(n) > 1})
        raise InvalidArgument(f"collections names {', '.join(doubled)} more than once; each collection once")
    if collection and check_collection(collection) not in checked:
        raise InvalidArgument(f"collection {collection!r} is not one of collections {checked}: "
                              "leave collection empty or name one of them")
    primary = check_collection(collection) if collection else checked[0]
    return (checked if len(checked) > 1 else []), primary


def check_doc_id(doc_id: str) -> str:
    if not DOC_ID.fullmatch(doc_id):
        raise InvalidArgument(
            f"document id {doc_id[:80]!r} is invalid: 1-{MAX_DOC_ID_CHARS} characters, no whitespace and no '#'"
        )
    return doc_id


def check_doc_ids(doc_ids: Iterable[str]) -> list[str]:
    ids = list(doc_ids)
    if len(ids) > MAX_DELETE_IDS:
        raise InvalidArgument(f"at most {MAX_DELETE_IDS} ids a request, got {len(ids)}")
    return [check_doc_id(i) for i in ids]


def check_field(name: str, where: str) -> str:
    """A metadata key or a filter's field (`where` names it in the message)."""
    if not FIELD_NAME.fullmatch(name):
        raise InvalidArgument(f"{where} {name[:80]!r} is invalid: {FIELD_RULE}")
    return name


def check_value(value: str, where: str) -> str:
    if len(value) > MAX_VALUE_CHARS:
        raise InvalidArgument(f"{where} is {len(value)} characters; the limit is {MAX_VALUE_CHARS}")
    return value


def check_metadata(metadata: Mapping[str, str], where: str) -> None:
    """Keys per document, each key and value, and the whole metadata's UTF-8 bytes."""
    if len(metadata) > MAX_METADATA_KEYS:
        raise InvalidArgument(f"{where} has {len(metadata)} metadata keys; the limit is {MAX_METADATA_KEYS}")
    size = 0
    for key, value in metadata.items():
        check_field(key, f"{where} metadata key")
        check_value(value, f"{where} metadata[{key!r}]")
        size += len(key.encode()) + len(value.encode())
    if size > MAX_METADATA_BYTES:
        raise InvalidArgument(f"{where} metadata is {size} bytes; the limit is {MAX_METADATA_BYTES}")


def check_filters(filters: Iterable[common_pb2.MetadataFilter]) -> list[common_pb2.MetadataFilter]:
    out = list(filters)
    if len(out) > MAX_FILTERS:
        raise InvalidArgument(f"at most {MAX_FILTERS} filters are allowed, got {len(out)}")
    for i, f in enumerate(out):
        check_field(f.field, f"filters[{i}].field")
        which = f.WhichOneof("condition")
        if which is None:
            raise InvalidArgument(f"filters[{i}] on {f.field!r} has no condition (equals, any_of or not_equals)")
        values = list(f.any_of.values) if which == "any_of" else [getattr(f, which)]
        if which == "any_of" and not values:
            raise InvalidArgument(f"filters[{i}].any_of on {f.field!r} is empty")
        if len(values) > MAX_FILTER_VALUES:
            raise InvalidArgument(f"filters[{i}].any_of has more than {MAX_FILTER_VALUES} values")
        for value in values:
            check_value(value, f"filters[{i}] value")
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


def check_document(doc, where: str) -> None:
    """A document as the ingest API takes it (an ingest_pb2.Document): its id, title, text, metadata and a
    reader's sections in the limits; InvalidArgument naming `where` otherwise. The gateway checks every
    document of a write with it, and `hybridsearch index` each document it read before sending it."""
    check_doc_id(doc.id)
    if not doc.text.strip() and not doc.title.strip():
        raise InvalidArgument(f"{where} has neither title nor text")
    if len(doc.text) > MAX_TEXT_CHARS:
        raise InvalidArgument(f"{where} text is {len(doc.text)} characters; the limit is {MAX_TEXT_CHARS}")
    if len(doc.title) > MAX_TITLE_CHARS:
        raise InvalidArgument(f"{where} title is {len(doc.title)} characters; the limit is {MAX_TITLE_CHARS}")
    check_metadata(doc.metadata, where)
    check_sections(doc, where)


def check_sections(doc, where: str) -> None:
    """A reader's sections: inside the text, in order, not overlapping; their metadata as a document's."""
    if doc.source_line_offset < 0 or doc.source_char_offset < 0:
        raise InvalidArgument(f"{where} source offsets must not be negative")
    if len(doc.sections) > MAX_SECTIONS:
        raise InvalidArgument(f"{where} has {len(doc.sections)} sections; the limit is {MAX_SECTIONS}")
    previous = 0
    for i, section in enumerate(doc.sections):
        if not previous <= section.start <= section.end <= len(doc.text):
            raise InvalidArgument(f"{where} sections[{i}] [{section.start}, {section.end}) is not inside the "
                                  f"text ({len(doc.text)} characters) after the section before it (ends at {previous})")
        if len(section.heading) > MAX_TITLE_CHARS:
            raise InvalidArgument(f"{where} sections[{i}] heading is {len(section.heading)} characters; "
                                  f"the limit is {MAX_TITLE_CHARS}")
        check_metadata({**doc.metadata, **section.metadata}, f"{where} sections[{i}]")
        previous = section.end
