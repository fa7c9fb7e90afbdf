"""What a collection declares about itself: text fields and their boosts, typo tolerance, language, tags,
metadata boosts and demotions, links. Every service reads it from here (gateway, bm25, vector, expansion).

Collections come from settings: `collections` (HYBRIDSEARCH_COLLECTIONS as JSON) and `collections_file`
(YAML or JSON, the same mapping; a chart ConfigMap on Kubernetes), the file read first and the mapping
on top. A collection nobody declared gets the defaults, and the defaults change nothing: title and text
only, no fuzzy matching, English analysis, no tag leg, no boosts, no link expansion.

    # collections.yaml
    notes:
      fuzzy: true
      fields: {summary: 2.0, name: 1.5, path: 0.5}      # CodeRAG's boosts; content (text) is 1.0
      tag_leg: true
      boosts:
        - {field: type, value: decision, fusion: 1.3, rerank: 1.25}
        - {field: status, value: done, fusion: 0.6, rerank: 0.7}

Fields, language and analyzer are read when chunks are written: changing them needs a re-ingest
(`hybridsearch reconcile` does not rewrite analysis). Query-side settings (fuzzy, tag leg, boosts)
apply from the next query; links (`links_field`) are read when chunks are written, like fields.
"""

from __future__ import annotations

import json
from enum import StrEnum
from pathlib import Path

import yaml
from pydantic import BaseModel, Field, field_validator, model_validator

from hybridsearch.security.acl import checked_acl
from hybridsearch.text.language import check_collection_language
from hybridsearch.v1 import common_pb2
from hybridsearch.contract.validation import COLLECTION_NAME, FIELD_NAME, split_generation

# Built into every collection: the document's title and its text (chunked).
BUILTIN_FIELDS = ("title", "text")


class SealedTerms(StrEnum):
    """What a sealed collection's BM25 index holds as terms (docs/security.md, "Sealed at rest")."""

    CLEAR = "clear"    # the analyzed words (stems): the index is readable as a vocabulary with its statistics
    HASHED = "hashed"  # keyed hashes of those stems (security/hashed_terms.py): no prefix or typo matching


class MetadataBoost(BaseModel):
    """A multiplier for hits whose metadata `field` equals `value` (Gnosis: type boosts 1.3x/1.4x at
    fusion, 1.25x/1.3x after rerank, capped at 1.0; demotions 0.6x/0.7x). Below 1 demotes."""

    field: str
    value: str
    fusion: float = Field(1.0, gt=0, le=10)
    rerank: float = Field(1.0, gt=0, le=10)

    @field_validator("field")
    @classmethod
    def _flat_key(cls, value: str) -> str:
        if not FIELD_NAME.fullmatch(value):
            raise ValueError(f"boost field {value!r} is not a metadata key ([A-Za-z0-9_-]{{1,64}})")
        return value


class DefaultReaders(BaseModel):
    """Who reads a document of the collection that names no readers of its own (security/acl.py): principals
    (user:<name>, group:<name>) or `*`. An empty `allow` (the default): every caller the collection admits. Read
    on every search, so a change applies to those documents at once, with nothing written again."""

    allow: list[str] = Field(default_factory=list)
    deny: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _principals(self) -> "DefaultReaders":
        checked = checked_acl(common_pb2.Acl(allow=self.allow, deny=self.deny), "acl")
        self.allow, self.deny = list(checked.allow), list(checked.deny)
        return self


class CollectionConfig(BaseModel):
    # Typo tolerance by default for this collection's queries (a request's `fuzzy` overrides it).
    fuzzy: bool = False
    # BM25 analysis language (a Snowball stemmer and its stopwords): en, de, ... (text.language.SUPPORTED)
    # or "auto" (each document's detected language; bm25/analyzer.py). Also the fallback of query detection.
    language: str = "en"
    # Extra BM25 fields: metadata key -> boost; title and text are always there (text at 1.0).
    fields: dict[str, float] = Field(default_factory=dict)
    # Metadata key whose comma-separated values are the document's tags (the tag leg matches them exactly).
    tags_field: str = "tags"
    tag_leg: bool = False
    boosts: list[MetadataBoost] = Field(default_factory=list)
    # Metadata key listing linked document ids (comma-separated), besides links found in the text.
    links_field: str = "links"
    # Link expansion by default for this collection's queries (a request's `graph` overrides it).
    graph: bool = False
    # Metadata fields each hit shows (SearchHit.metadata) when a request names none (its return_metadata).
    return_metadata: list[str] = Field(default_factory=list)
    # Sealed at rest (security/sealing.py, docs/security.md): texts, titles and metadata values sealed with the
    # collection's key in every store, tags and metadata as keyed hashes. Needs a key (`keys create -c`).
    sealed: bool = False
    # A sealed collection's BM25 terms: `clear` (stems) or `hashed` (keyed hashes of the same stems: the same
    # ranking, no prefix or typo matching; security/hashed_terms.py). Only a sealed collection hashes its terms.
    sealed_terms: SealedTerms = SealedTerms.CLEAR
    # The readers of a document that names none (Document.acl unset; docs/security.md "Document readers").
    acl: DefaultReaders = Field(default_factory=DefaultReaders)

    @model_validator(mode="after")
    def _hashed_terms_need_a_seal(self) -> "CollectionConfig":
        if self.sealed_terms is SealedTerms.HASHED:
            if not self.sealed:
                raise ValueError("sealed_terms: hashed needs sealed: true (the terms are hashed with the "
                                 "collection's key)")
            if self.fuzzy:
                raise ValueError("fuzzy: true cannot apply to sealed_terms: hashed (typo and prefix matching "
                                 "need the words; a hash has no neighbours)")
        return self

    @property
    def hashed_terms(self) -> bool:
        return self.sealed_terms is SealedTerms.HASHED

    @field_validator("language")
    @classmethod
    def _language(cls, value: str) -> str:
        return check_collection_language(value)

    @field_validator("return_metadata")
    @classmethod
    def _shown_names(cls, value: list[str]) -> list[str]:
        for name in value:
            if not FIELD_NAME.fullmatch(name):
                raise ValueError(f"return_metadata {name!r} is not a metadata key ([A-Za-z0-9_-]{{1,64}})")
        return value

    @field_validator("fields")
    @classmethod
    def _field_names(cls, value: dict[str, float]) -> dict[str, float]:
        for name, boost in value.items():
            if not FIELD_NAME.fullmatch(name):
                raise ValueError(f"field {name!r} is not a metadata key ([A-Za-z0-9_-]{{1,64}})")
            if not 0 < boost <= 100:
                raise ValueError(f"field {name!r}: boost {boost} is outside (0, 100]")
        return value


DEFAULT = CollectionConfig()


def load_collections_file(path: Path) -> dict[str, CollectionConfig]:
    """A YAML or JSON mapping of collection name -> CollectionConfig."""
    text = path.read_text()
    raw = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ValueError(f"{path}: expected a mapping of collection name to its settings")
    return {str(name): CollectionConfig.model_validate(body or {}) for name, body in raw.items()}


def check_collections(collections: dict[str, CollectionConfig]) -> dict[str, CollectionConfig]:
    for name in collections:
        if not COLLECTION_NAME.fullmatch(name):
            raise ValueError(f"collection {name!r} is not a collection name ([a-z0-9][a-z0-9_-]{{0,62}})")
    return collections


def collection_config(settings, collection: str) -> CollectionConfig:
    """The declared configuration of `collection`, or the defaults; a generation (`notes.g2`) has its alias's."""
    return settings.collections.get(split_generation(collection)[0], DEFAULT)
