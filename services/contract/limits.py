"""Every input limit of the stack, in one place: message bytes per RPC, and the field limits under them.

A server refuses a request over its RPC's byte limit before decoding it (RESOURCE_EXHAUSTED naming
the limit, `contract.wire`), and validation refuses a field over its limit (INVALID_ARGUMENT naming
the limit, `contract.validation`, `gateway.query.request`, `gateway.ingest.servicer`). The byte limits are sized to
what the field limits allow, so a request within every field limit is never refused for its size;
the internal ones to what the gateway legitimately sends (README "Limits" tells the same table).
"""

from __future__ import annotations

from hybridsearch.runtime import services

KiB = 1024
MiB = 1024 * KiB

# --- fields -----------------------------------------------------------------------------------------
MAX_CONTEXT = 5                  # SearchRequest.context: neighbouring chunks before and after each hit
MAX_QUERY_CHARS = 8192           # SearchRequest.query
MAX_FILTERS = 16                 # filters of one request
MAX_FILTER_VALUES = 256          # values of one any_of
MAX_DOCUMENTS = 1000             # documents of one Upsert (or of one UpsertStream message)
MAX_TEXT_CHARS = 1_000_000       # Document.text
MAX_TITLE_CHARS = 1000           # Document.title
MAX_SECTIONS = 10_000            # a reader's sections of one document (Document.sections)
MAX_METADATA_KEYS = 64           # metadata keys of one document
MAX_KEY_CHARS = 64               # a metadata key, and a filter's field
MAX_VALUE_CHARS = 1024           # a metadata value, and a filter's value (no stored value is longer)
MAX_METADATA_BYTES = 8 * KiB     # a document's metadata, keys and values in UTF-8
MAX_DOC_ID_CHARS = 256           # Document.id
MAX_DELETE_IDS = 1000            # ids of one Delete
MAX_GET_IDS = 100                # ids of one GetDocuments (whole documents come back)
MAX_CHUNKS_PER_REQUEST = 20_000  # chunks of one internal UpsertChunks
MAX_LEG_QUERIES = 32             # queries of one internal leg search
MAX_LEG_LIMIT = 1000             # hits per query of one internal leg search

# --- message bytes per RPC (requests, as the server receives them) ---------------------------------
# Filters at their limits take 16 x 256 x 1024 characters: the byte limits of every message that
# carries filters bound them instead (a request that big is refused as too large, not decoded).
SEARCH_REQUEST_BYTES = 64 * KiB
UPSERT_REQUEST_BYTES = 8 * MiB          # one text at its limit is <= 4 MiB of UTF-8
STORE_UPSERT_BYTES = 32 * MiB           # the chunks an Upsert becomes (title and metadata ride on each)
REQUEST_BYTES: dict[str, int] = {
    # public: what clients send to the gateway
    "hybridsearch.v1.SearchService/Search": SEARCH_REQUEST_BYTES,
    "hybridsearch.v1.IngestService/Upsert": UPSERT_REQUEST_BYTES,
    "hybridsearch.v1.IngestService/UpsertStream": UPSERT_REQUEST_BYTES,  # each message of the stream
    "hybridsearch.v1.IngestService/Delete": 1 * MiB,                     # 1000 ids of 256 characters
    "hybridsearch.v1.IngestService/Stats": 1 * KiB,
    "hybridsearch.v1.CollectionService/GetDocuments": 64 * KiB,          # 100 ids of 256 characters
    "hybridsearch.v1.CollectionService/ListCollections": 1 * KiB,
    "hybridsearch.v1.CollectionService/DropCollection": 1 * KiB,
    # internal: what the gateway sends to the stores, expansion and fusion
    "hybridsearch.v1.Bm25Service/Search": 256 * KiB,                     # the query, its variants, filters
    "hybridsearch.v1.VectorService/Search": 256 * KiB,
    "hybridsearch.v1.Bm25Service/UpsertChunks": STORE_UPSERT_BYTES,
    "hybridsearch.v1.VectorService/UpsertChunks": STORE_UPSERT_BYTES,
    "hybridsearch.v1.Bm25Service/DeleteDocuments": 1 * MiB,
    "hybridsearch.v1.VectorService/DeleteDocuments": 1 * MiB,
    "hybridsearch.v1.Bm25Service/ContentHashes": 1 * MiB,
    "hybridsearch.v1.VectorService/ContentHashes": 1 * MiB,
    "hybridsearch.v1.Bm25Service/ListDocuments": 1 * KiB,
    "hybridsearch.v1.VectorService/ListDocuments": 1 * KiB,
    "hybridsearch.v1.Bm25Service/GetChunks": 1 * MiB,                    # 1000 ids of 256 characters
    "hybridsearch.v1.VectorService/GetChunks": 1 * MiB,
    "hybridsearch.v1.Bm25Service/Stats": 1 * KiB,
    "hybridsearch.v1.Bm25Service/Correct": SEARCH_REQUEST_BYTES,         # one query (the vector leg's, fuzzy)
    "hybridsearch.v1.VectorService/Stats": 1 * KiB,
    "hybridsearch.v1.Bm25Service/ListCollections": 64 * KiB,             # names to look up (a search's, at most 8)
    "hybridsearch.v1.VectorService/ListCollections": 64 * KiB,
    "hybridsearch.v1.Bm25Service/DropCollection": 1 * KiB,
    "hybridsearch.v1.Bm25Service/CreateCollection": 1 * KiB,
    "hybridsearch.v1.VectorService/DropCollection": 1 * KiB,
    "hybridsearch.v1.ExpansionService/Expand": SEARCH_REQUEST_BYTES,
    "hybridsearch.v1.FusionService/Fuse": 16 * MiB,                      # ranked lists of ids, no texts
}
# Anything else a server answers (health, reflection): small.
OTHER_REQUEST_BYTES = 64 * KiB
# Which services each server process runs (`hybridsearch serve NAME`).
SERVICES_OF = {s.name: s.grpc for s in services.SERVICES}
MAX_RECEIVE_BYTES = max(REQUEST_BYTES.values())
# Responses and client channels: a leg's ranked lists carry passages (1000 hits x 32 queries at most).
MAX_RESPONSE_BYTES = 64 * MiB


def request_limit(method: str) -> int:
    """The byte limit of a request to `method` ("/package.Service/Method", as gRPC names it)."""
    return REQUEST_BYTES.get(method.lstrip("/"), OTHER_REQUEST_BYTES)


def receive_limit(server: str) -> int:
    """What gRPC lets a server receive at all: the largest limit of its RPCs (each RPC's own limit is
    then checked on the received bytes, before decoding); a server of unknown name gets the largest."""
    served = SERVICES_OF.get(server)
    if served is None:
        return MAX_RECEIVE_BYTES
    return max(limit for rpc, limit in REQUEST_BYTES.items() if rpc.split("/")[0].rsplit(".", 1)[-1] in served)


def human_bytes(n: int) -> str:
    """1024 -> '1 KiB', 8388608 -> '8 MiB', 1500 -> '1500 bytes'."""
    for unit, size in (("MiB", MiB), ("KiB", KiB)):
        if n >= size and n % size == 0:
            return f"{n // size} {unit}"
    return f"{n} bytes"
