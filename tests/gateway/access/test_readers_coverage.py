"""Every field of every public request and response, and why it carries nothing of a document its caller may not
read (issue 36). A field added to a public message fails this test until it is placed here, with the reason it is
safe and the test that shows it: a new read path cannot slip past the permission suite
(tests/gateway/access/test_document_readers.py) unnoticed."""

from __future__ import annotations

import enum

from google.protobuf import descriptor_pool

import hybridsearch.v1.aliases_pb2  # noqa: F401  (the public services' descriptors, loaded)
import hybridsearch.v1.collections_pb2  # noqa: F401
import hybridsearch.v1.ingest_pb2  # noqa: F401
import hybridsearch.v1.search_pb2  # noqa: F401
import hybridsearch.v1.snapshots_pb2  # noqa: F401
from hybridsearch.runtime import services


class Why(enum.Enum):
    ASKED = "the caller's own input: collections it names are checked (scope.SCOPE), documents it names filtered"
    RANKED = "made from the legs' hits, each leg filtered by the caller's readers before ranking"
    COUNTED = "counts of the documents the caller's readers read (StoreStatsRequest.readers)"
    OWN = "the search's own state (legs, timings, notices, settings): no document's content"
    WRITTEN = "a write's result: writing is a right on the whole collection, as a key grants it"
    ADMIN = "admin keys only (auth.METHOD_OPERATIONS): they read every document by design"


PERMISSION_SUITE = "tests/gateway/access/test_document_readers.py"
# message -> (why its fields are safe, its fields in order); RANKED and COUNTED are exercised by the permission suite
COVERED = {
    "SearchRequest": (Why.ASKED, "query collection top_k mode effort filters fusion min_score explain offset rerank "
                                 "fuzzy language page_token collections expand graph return_metadata context no_floor"),
    "MetadataFilter": (Why.ASKED, "field equals any_of not_equals"),
    "StringList": (Why.ASKED, "values"),
    "FusionConfig": (Why.ASKED, "method rrf_k bm25_weight vector_weight variant_weight hyde_weight top_rank_bonus "
                                "rrf_bm25_weight rrf_vector_weight tag_weight rrf_tag_weight graph_weight leg_weights "
                                "rrf_leg_weights"),
    "SearchResponse": (Why.RANKED, "hits legs degraded mode effort total_candidates took_ms explain notices "
                                   "next_page_token counts tag_counts offset"),
    "SearchHit": (Why.RANKED, "doc_id chunk_id title snippet score fusion_score rerank_score reranked legs highlights "
                              "complete full_text marked_snippet collection blended_score metadata path type modified "
                              "citation context_before context_after"),
    "LegRank": (Why.RANKED, "leg kind rank score"),
    "Highlight": (Why.RANKED, "start end"),
    "Citation": (Why.RANKED, "chunk snippet"),
    "SourceSpan": (Why.RANKED, "start_char end_char start_line end_line"),
    "ContextChunk": (Why.RANKED, "chunk_id position heading text span"),  # its hit's own document's chunks
    "LegStatus": (Why.OWN, "name state reason"),
    "Explanation": (Why.RANKED, "lexical_variants semantic_variants hyde expansion_generator expansion_cache_hit "
                                "leg_lists fusion_order rerank_scores fusion timings reranker_model query_language "
                                "query_language_source query_language_confidence boosts"),
    "RankedList": (Why.RANKED, "leg kind query weight hits"),
    "LegHit": (Why.RANKED, "chunk_id doc_id score rank title text metadata span sealed"),
    "Sealed": (Why.RANKED, "blob key_id"),
    "StageTiming": (Why.OWN, "stage ms"),
    "AppliedBoost": (Why.RANKED, "doc_id field value stage factor collection"),
    "ResultCounts": (Why.RANKED, "reranked candidates returned line above_min_score"),
    "UpsertRequest": (Why.ASKED, "collection documents"),
    "Document": (Why.ASKED, "id title text metadata sections source_line_offset source_char_offset acl"),
    "DocumentSection": (Why.ASKED, "start end heading metadata"),
    "Acl": (Why.ASKED, "allow deny"),
    "UpsertResponse": (Why.WRITTEN, "documents_received documents_written documents_unchanged chunks_written"),
    "DeleteRequest": (Why.ASKED, "collection ids"),
    "DeleteResponse": (Why.WRITTEN, "documents_deleted"),
    "StatsRequest": (Why.ASKED, "collection"),
    "StatsResponse": (Why.COUNTED, "collection stores"),
    "StoreSummary": (Why.COUNTED, "store engine documents chunks details"),  # details counting it all left out
    "GetDocumentsRequest": (Why.ASKED, "collection ids"),
    "GetDocumentsResponse": (Why.RANKED, "collection documents missing"),  # a forbidden id is missing, as absent
    "FetchedDocument": (Why.RANKED, "id title text metadata chunks content_hash written_at_ms"),
    "DocumentChunk": (Why.RANKED, "chunk_id position heading start end"),
    "ListCollectionsRequest": (Why.ASKED, ""),
    "ListCollectionsResponse": (Why.COUNTED, "collections notices"),
    "CollectionInfo": (Why.COUNTED, "name documents chunks stores language options"),
    "DropCollectionRequest": (Why.ASKED, "collection"),
    "DropCollectionResponse": (Why.WRITTEN, "collection existed documents chunks cache_entries"),
    "CreateSnapshotRequest": (Why.ADMIN, "collection repository"),
    "CreateSnapshotResponse": (Why.ADMIN, "snapshot"),
    "SnapshotInfo": (Why.ADMIN, "location id collection created_at documents chunks bytes_total bytes_new "
                                "write_pause_ms seconds embedder"),
    "ListSnapshotsRequest": (Why.ADMIN, "repository collection"),
    "ListSnapshotsResponse": (Why.ADMIN, "snapshots notices"),
    "RestoreSnapshotRequest": (Why.ADMIN, "location collection"),
    "RestoreSnapshotResponse": (Why.ADMIN, "collection documents chunks bytes_read seconds"),
    "DeleteSnapshotRequest": (Why.ADMIN, "location"),
    "DeleteSnapshotResponse": (Why.ADMIN, "pieces_deleted pieces_kept"),
    "GetAliasRequest": (Why.ADMIN, "collection"),
    "GetAliasResponse": (Why.ADMIN, "alias"),
    "AliasInfo": (Why.ADMIN, "collection serving generations switched_unix"),
    "GenerationInfo": (Why.ADMIN, "number stored_name role embedder documents chunks created_unix built_unix note "
                                  "language"),
    "ListAliasesRequest": (Why.ADMIN, ""),
    "ListAliasesResponse": (Why.ADMIN, "aliases"),
    "ReindexRequest": (Why.ADMIN, "collection embedder switch_when_built batch_documents language"),
    "ReindexResponse": (Why.ADMIN, "phase generation round to_copy copied removed documents seconds alias "
                                   "write_pause_ms"),
    "SwitchAliasRequest": (Why.ADMIN, "collection generation"),
    "SwitchAliasResponse": (Why.ADMIN, "alias"),
    "RollbackAliasRequest": (Why.ADMIN, "collection"),
    "RollbackAliasResponse": (Why.ADMIN, "alias"),
    "DropGenerationRequest": (Why.ADMIN, "collection generation"),
    "DropGenerationResponse": (Why.ADMIN, "dropped alias"),
}


def public_messages() -> dict[str, list[str]]:
    """Every message a public RPC takes or answers, nested ones too (map entries aside), and its fields."""
    pool = descriptor_pool.Default()
    found: dict[str, list[str]] = {}

    def walk(message) -> None:
        if message.name in found:
            return
        found[message.name] = [f.name for f in message.fields]
        for field in message.fields:
            if field.message_type is not None and not field.message_type.GetOptions().map_entry:
                walk(field.message_type)

    for service in services.SERVICES:
        for name in service.grpc if service.public else ():
            for method in pool.FindServiceByName(f"hybridsearch.v1.{name}").methods:
                walk(method.input_type)
                walk(method.output_type)
    return found


def test_every_public_field_is_placed():
    found = public_messages()
    missing = sorted(set(found) - set(COVERED))
    assert not missing, f"public messages not in COVERED: {missing}: say why each field reads nothing forbidden"
    for message, fields in found.items():
        _, listed = COVERED[message]
        assert fields == listed.split(), (f"{message}: fields {fields} but COVERED lists {listed.split()}: place the "
                                          "new field (and cover it in the permission suite when it reads documents)")
    assert not set(COVERED) - set(found), f"stale rows: {sorted(set(COVERED) - set(found))}"


def test_what_reads_documents_is_in_the_permission_suite():
    """Each message whose fields come from documents names a read path the permission suite walks."""
    suite = (__import__("pathlib").Path(__file__).parent / "test_document_readers.py").read_text()
    paths = {"SearchResponse": "def test_every_mode", "GetDocumentsResponse": "get_documents(",
             "StatsResponse": "client.stats(", "ListCollectionsResponse": "list_collections(",
             "Explanation": "explain=True", "ContextChunk": "context=1", "Citation": "def test_every_mode"}
    for message, (why, _) in COVERED.items():
        if why in (Why.RANKED, Why.COUNTED) and message in paths:
            assert paths[message] in suite, (message, PERMISSION_SUITE)
