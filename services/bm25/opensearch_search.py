"""OpenSearch searches in and out: metadata filters as filter clauses (with the semantics of
validation.matches_filters), and a search response checked whole (a failed shard or a timeout is
EngineUnavailable, never a partial list), and the text query.

Typo tolerance (`fuzzy`): a second clause, the same fields matched with Lucene's `fuzziness` (one edit
from MIN_FUZZY_CHARS characters on, `prefix_length` 1, at most MAX_EXPANSIONS terms per word, as the
embedded engines' fuzzy.py), weighted FUZZY_WEIGHT, so exact matches score above fuzzy ones. Unlike the
embedded engines, Lucene also expands words the index knows (it cannot ask for document frequencies
first) and has no prefix expansion, and `correct` returns the query unchanged (the vector leg then embeds
what was typed).
"""

from __future__ import annotations

from typing import Any


from hybridsearch.bm25.engine import field_name
from hybridsearch.bm25.fuzzy import FUZZY_WEIGHT, MAX_EXPANSIONS, MIN_FUZZY_CHARS
from hybridsearch.storage.stores import (
    EngineUnavailable,
)
from hybridsearch.bm25.opensearch_index import READERS_KEY
from hybridsearch.security.acl import ALLOW, DENY, readers_key_of, refused, wanted
from hybridsearch.v1 import common_pb2


def filter_clauses(filters: list[common_pb2.MetadataFilter]) -> tuple[list[dict], list[dict]]:
    """(filter, must_not) clauses with the semantics of validation.matches_filters."""
    must, must_not = [], []
    for f in filters:
        key = f"meta.{f.field}"
        which = f.WhichOneof("condition")
        if which == "equals":
            must.append({"term": {key: f.equals}})
        elif which == "any_of":
            must.append({"terms": {key: list(f.any_of.values)}})
        elif which == "not_equals":
            must_not.append({"term": {key: f.not_equals}})
    return must, must_not


def readers_clauses(readers: common_pb2.Readers | None) -> tuple[list[dict], list[dict]]:
    """(filter, must_not) clauses of what `readers` may read (security/acl.py): a terms filter on the allow terms
    (a chunk indexed before readers were kept has none: the collection default's), none of theirs denied."""
    if readers is None:
        return [], []
    may: list[dict] = [{"terms": {ALLOW: wanted(readers)}}]
    if readers.default_readable:
        may.append({"bool": {"must_not": [{"exists": {"field": ALLOW}}]}})
    denied = refused(readers)
    return [{"bool": {"should": may, "minimum_should_match": 1}}], ([{"terms": {DENY: denied}}] if denied else [])


def versions_query(ids: list[str]) -> dict[str, Any]:
    """The search that tells, for each of these documents, what versions of it the index holds (stored_versions)."""
    readers = {"terms": {"field": READERS_KEY, "size": 2, "missing": readers_key_of(common_pb2.Acl())}}
    return {"size": 0, "query": {"terms": {"doc_id": ids}},
            "aggs": {"docs": {"terms": {"field": "doc_id", "size": len(ids)},
                              "aggs": {"hashes": {"terms": {"field": "content_hash", "size": 2},
                                                  "aggs": {"readers": readers}}}}}}


def version_of(chunk: common_pb2.Chunk) -> str:
    """A chunk's version: its document's content hash and readers (READERS_KEY; before readers: the default's)."""
    return f"{chunk.content_hash} {readers_key_of(chunk.acl)}"


def stored_versions(response: dict[str, Any]) -> dict[str, dict[str, int]]:
    """Document id -> {version: chunks} from a versions_query's response (one version: a whole write)."""
    return {bucket["key"]: {f'{h["key"]} {r["key"]}': r["doc_count"] for h in bucket["hashes"]["buckets"]
                            for r in h["readers"]["buckets"]}
            for bucket in response["aggregations"]["docs"]["buckets"]}


def check_search_response(response: dict[str, Any]) -> dict[str, Any]:
    """The response if it is complete; EngineUnavailable if any shard failed or the search timed out."""
    if "error" in response:
        error = response["error"]
        reason = error.get("reason", error) if isinstance(error, dict) else error
        causes = _root_causes(error)
        detail = f"{reason} ({causes})" if causes else f"{reason}"
        raise EngineUnavailable(f"search failed (status {response.get('status')}): {detail}")
    shards = response.get("_shards", {})
    if shards.get("failed", 0) > 0:
        raise EngineUnavailable(
            f"{shards['failed']} of {shards.get('total')} shards failed: "
            f"{_shard_failures(shards.get('failures', []))}"
        )
    if response.get("timed_out"):
        raise EngineUnavailable("search timed out: the results are partial")
    return response


def _root_causes(error: Any) -> str:
    if not isinstance(error, dict):
        return ""
    causes = error.get("root_cause") or []
    return "; ".join(f"{c.get('type')}: {c.get('reason')}" for c in causes if isinstance(c, dict))


def _shard_failures(failures: list[dict[str, Any]]) -> str:
    reasons = {f"{f.get('index')}: {(f.get('reason') or {}).get('type')}: {(f.get('reason') or {}).get('reason')}"
               for f in failures}
    return "; ".join(sorted(reasons)) or "no reason given"


# Lucene's AUTO:low,high: no edit under `low` characters, one up to `high`, two from there (never, in practice).
FUZZINESS = f"AUTO:{MIN_FUZZY_CHARS},256"
FUZZY_PREFIX_LENGTH = 1  # the first character is never fuzzed: fewer terms to enumerate


def text_query(text: str, fields: dict[str, float], title_boost: float, fuzzy: bool) -> dict[str, Any]:
    """The query of `text` over `flat`, the title and the declared fields with their boosts; with `fuzzy`, the
    same fields matched with typos too, weighted FUZZY_WEIGHT (user text only ever reaches match/multi_match)."""
    boosted = ([f"title^{title_boost}"] if title_boost > 0 else []) + \
        [f"{field_name(key)}^{boost}" for key, boost in sorted(fields.items())]
    # most_fields sums the field scores: BM25(flat) + boost x BM25(field) per field, as embedded.
    exact = ({"multi_match": {"query": text, "type": "most_fields", "fields": ["flat", *boosted]}} if boosted
             else {"match": {"flat": {"query": text}}})
    if not fuzzy:
        return exact
    typos = {"multi_match": {"query": text, "type": "most_fields", "fields": ["flat", *boosted],
                             "fuzziness": FUZZINESS, "prefix_length": FUZZY_PREFIX_LENGTH,
                             "max_expansions": MAX_EXPANSIONS, "fuzzy_transpositions": True,
                             "boost": FUZZY_WEIGHT}}
    return {"bool": {"should": [exact, typos]}}
