"""Hostile input through the real stack (every service its own process, ports 5305x of their own).

The defects probing found, each pinned by a test, then a property-based fuzz (hypothesis) of Search,
Upsert, UpsertStream, Delete and Stats with typed messages at and past every limit, query-syntax
fragments and odd unicode in every string field, and raw bytes. Allowed answers: OK,
INVALID_ARGUMENT, RESOURCE_EXHAUSTED; never UNKNOWN, INTERNAL, UNAVAILABLE or DEADLINE_EXCEEDED
(every call has a 10 s deadline, so a hang fails), and every process of the stack still serves
after the run.

2,000 cases by default; `HYBRIDSEARCH_FUZZ_CASES=100000` runs more (README "Limits" says how)
and the counts by RPC and status code are printed and written to `HYBRIDSEARCH_FUZZ_REPORT`
(default: fuzz-report.json in pytest's temporary directory).
"""

from __future__ import annotations

import json
import os
from collections import Counter

import grpc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from stacks import gateway_client, running_stack, stack_env_on

from hybridsearch.query import legs

from hybridsearch.runtime import services
from hybridsearch.security.access import gateway_channel
from hybridsearch.contract.limits import (
    MAX_DELETE_IDS,
    MAX_DOC_ID_CHARS,
    MAX_DOCUMENTS,
    MAX_FILTER_VALUES,
    MAX_FILTERS,
    MAX_KEY_CHARS,
    MAX_METADATA_BYTES,
    MAX_METADATA_KEYS,
    MAX_QUERY_CHARS,
    MAX_TEXT_CHARS,
    MAX_TITLE_CHARS,
    MAX_VALUE_CHARS,
)
from hybridsearch.launcher import grpc_healthy
from hybridsearch.v1 import common_pb2, fusion_pb2, ingest_pb2, search_pb2

pytestmark = pytest.mark.stack
DEADLINE_S = 10.0
ALLOWED = {grpc.StatusCode.OK, grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.RESOURCE_EXHAUSTED}
SEARCH = "/hybridsearch.v1.SearchService/Search"
UPSERT = "/hybridsearch.v1.IngestService/Upsert"
STREAM = "/hybridsearch.v1.IngestService/UpsertStream"
DELETE = "/hybridsearch.v1.IngestService/Delete"
STATS = "/hybridsearch.v1.IngestService/Stats"
# A search or the stats of a well-formed collection name that no store holds is NOT_FOUND naming it
# (gateway/resources/catalog.py).
ALLOWED_BY_RPC = {rpc: ALLOWED | {grpc.StatusCode.NOT_FOUND} for rpc in (SEARCH, STATS)}
BAD_UTF8 = b"\x0a\x02\xff\xfe"  # field 1, a string in every request, holding invalid UTF-8
CASES = int(os.environ.get("HYBRIDSEARCH_FUZZ_CASES", "2000"))
COUNTS: Counter = Counter()


STARTED_PIDS: dict[str, int] = {}


def process_ids(stack) -> dict[str, int]:
    """Each part's pid (0: not running). A part that died changes its pid even when a supervisor
    (supervisord, in a launcher that has one) restarted it."""
    supervisor = getattr(stack, "supervisor", None)
    if supervisor is None:
        return {name: proc.pid if proc.poll() is None else 0 for name, proc in stack.procs.items()}
    pids = {}
    for name in stack.parts:
        try:
            pids[name] = supervisor.pid(name)
        except ProcessLookupError:
            pids[name] = 0
    return pids


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    env = {**stack_env_on("2305", "2687", "2850"), "HYBRIDSEARCH_DATA_DIR": str(tmp_path_factory.mktemp("hostile"))}
    with running_stack(env) as running:
        STARTED_PIDS.update(process_ids(running))
        yield running


@pytest.fixture(scope="module")
def channel(stack):
    # Raw bytes through the gateway with the stack's admin key (API keys are on in every `serve all`).
    with gateway_channel(stack.settings.endpoints.addr("gateway")) as ch:
        yield ch


@pytest.fixture(scope="module")
def indexed(stack):
    """Five documents in collection `legs` (no other test writes there) whose metadata the filters select."""
    docs = [ingest_pb2.Document(id=f"d{i}", title=f"Note {i}", text=f"glacier ice melt note number {i}",
                                metadata={"lang": "en" if i % 2 else "fr", "a-b": str(i % 3), "_k": "x"})
            for i in range(4)]
    docs.append(ingest_pb2.Document(id="d4", title="Note 4", text="glacier ice melt note without a language",
                                    metadata={"_k": "y"}))  # no lang, no a-b: not_equals keeps it, equals does not
    with gateway_client(stack) as client:
        client.index("legs", docs)
    return docs


def call(channel, method: str, data: bytes) -> tuple[grpc.StatusCode, str, bytes | None]:
    """A raw call (bytes in, bytes out): (code, details, reply)."""
    try:
        return grpc.StatusCode.OK, "", channel.unary_unary(method)(data, timeout=DEADLINE_S)
    except grpc.RpcError as err:
        return err.code(), err.details() or "", None


def stream(channel, messages: list[bytes]) -> tuple[grpc.StatusCode, str, dict]:
    """A raw UpsertStream: (code, details, trailing metadata)."""
    try:
        channel.stream_unary(STREAM)(iter(messages), timeout=DEADLINE_S)
        return grpc.StatusCode.OK, "", {}
    except grpc.RpcError as err:
        return err.code(), err.details() or "", dict(err.trailing_metadata() or ())


def search(channel, **fields) -> tuple[grpc.StatusCode, str, search_pb2.SearchResponse | None]:
    code, details, reply = call(channel, SEARCH, search_pb2.SearchRequest(**fields).SerializeToString())
    return code, details, None if reply is None else search_pb2.SearchResponse.FromString(reply)


def upsert(channel, collection: str, *docs: ingest_pb2.Document) -> tuple[grpc.StatusCode, str]:
    code, details, _ = call(channel, UPSERT, ingest_pb2.UpsertRequest(collection=collection, documents=docs).SerializeToString())
    return code, details


# --- defects, one test each --------------------------------------------------------------------------

@pytest.mark.parametrize("method", [SEARCH, UPSERT, DELETE, STATS])
@pytest.mark.parametrize("data", [BAD_UTF8, b"\x0a\x10abc", b"\xff" * 11], ids=["utf8", "truncated", "garbage"])
def test_gateway_answers_undecodable_bytes_invalid_argument(channel, method, data):
    code, details, _ = call(channel, method, data)
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "does not decode as hybridsearch.v1." in details


def test_a_stream_message_that_does_not_decode(channel):
    code, details, _ = stream(channel, [BAD_UTF8])
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "does not decode as hybridsearch.v1.UpsertRequest" in details


@pytest.mark.parametrize("service,method", [
    ("bm25", "Bm25Service/Search"), ("vector", "VectorService/UpsertChunks"),
    ("expansion", "ExpansionService/Expand"), ("fusion", "FusionService/Fuse"),
])
def test_internal_services_answer_undecodable_bytes_invalid_argument(stack, service, method):
    data = BAD_UTF8 if service != "fusion" else b"\x0a\x04\x1a\x02\xff\xfe"  # FuseRequest.lists[0].query
    with grpc.insecure_channel(stack.settings.endpoints.addr(service)) as ch:
        code, details, _ = call(ch, f"/hybridsearch.v1.{method}", data)
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "does not decode" in details


def test_size_limits_fit_each_rpc(channel):
    filters = [common_pb2.MetadataFilter(field="k", any_of=common_pb2.StringList(values=["v" * 1000] * 100))]
    code, details, _ = search(channel, query="q", filters=filters)
    assert code == grpc.StatusCode.RESOURCE_EXHAUSTED and "64 KiB" in details
    # The gateway's largest RPC: gRPC itself refuses it, naming the limit in bytes.
    code, details = upsert(channel, "hostile", *[ingest_pb2.Document(id=f"big{i}", text="x" * 900_000) for i in range(10)])
    assert code == grpc.StatusCode.RESOURCE_EXHAUSTED and str(8 * 2**20) in details
    code, details, _ = call(channel, STATS, ingest_pb2.StatsRequest(collection="x" * 2000).SerializeToString())
    assert code == grpc.StatusCode.RESOURCE_EXHAUSTED and "the limit of hybridsearch.v1.IngestService/Stats is 1 KiB" in details


@pytest.mark.parametrize("fields", [
    {"query": "q", "collection": "default\n"},
    {"query": "q", "filters": [common_pb2.MetadataFilter(field="lang\n", equals="en")]},
    {"query": "q", "filters": [common_pb2.MetadataFilter(field="meta.lang", equals="en")]},
    {"query": "q", "filters": [common_pb2.MetadataFilter(field="a..b", equals="en")], "mode": common_pb2.RETRIEVAL_MODE_VECTOR},
])
def test_names_with_a_trailing_newline_or_a_dot_are_invalid(channel, fields):
    code, _, _ = search(channel, **fields)
    assert code == grpc.StatusCode.INVALID_ARGUMENT


@pytest.mark.parametrize("doc", [
    ingest_pb2.Document(id="d\n", text="x"),
    ingest_pb2.Document(id="d", text="x", metadata={"k\n": "v"}),
    ingest_pb2.Document(id="d", text="x", metadata={"a.b": "v"}),
    ingest_pb2.Document(id="d", text="x", metadata={"k": "v" * 5_000_000}),
    ingest_pb2.Document(id="d", text="x", metadata={"k": "v" * (MAX_VALUE_CHARS + 1)}),
    ingest_pb2.Document(id="d", text="x" * (MAX_TEXT_CHARS + 1)),
])
def test_documents_past_a_limit_are_refused_with_it_named(channel, doc):
    code, details = upsert(channel, "hostile", doc)
    assert code in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.RESOURCE_EXHAUSTED), details
    assert "retry is safe" not in details


def test_a_store_refuses_a_bad_filter_itself(stack, indexed):
    from hybridsearch.v1 import vector_pb2_grpc

    request = common_pb2.LegSearchRequest(collection="legs", limit=5, queries=[common_pb2.LegQuery(text="ice")],
                                          filters=[common_pb2.MetadataFilter(field="a..b", equals="1")])
    with grpc.insecure_channel(stack.settings.endpoints.addr("vector")) as ch:
        with pytest.raises(grpc.RpcError) as err:
            vector_pb2_grpc.VectorServiceStub(ch).Search(request, timeout=DEADLINE_S)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT


@pytest.mark.parametrize("rpc", ["bm25:Search", "vector:Search", "vector:TagSearch"])
@pytest.mark.parametrize("fields,message", [(["a.b"], "metadata_fields[0]"), ([f"k{i}" for i in range(65)], "at most 64")])
def test_a_store_refuses_bad_metadata_fields(stack, indexed, rpc, fields, message):
    from hybridsearch.v1 import bm25_pb2_grpc, vector_pb2_grpc

    part, method = rpc.split(":")
    stubs = {"bm25": bm25_pb2_grpc.Bm25ServiceStub, "vector": vector_pb2_grpc.VectorServiceStub}
    request = common_pb2.LegSearchRequest(collection="legs", limit=5, queries=[common_pb2.LegQuery(text="ice")],
                                          metadata_fields=fields)
    with grpc.insecure_channel(stack.settings.endpoints.addr(part)) as ch:
        with pytest.raises(grpc.RpcError) as err:
            getattr(stubs[part](ch), method)(request, timeout=DEADLINE_S)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and message in err.value.details()


@pytest.mark.parametrize("flt", [
    common_pb2.MetadataFilter(field="lang", equals="en"),
    common_pb2.MetadataFilter(field="a-b", any_of=common_pb2.StringList(values=["0", "2"])),
    common_pb2.MetadataFilter(field="_k", not_equals="x"),
    common_pb2.MetadataFilter(field="lang", not_equals="en"),
])
def test_a_filter_selects_the_same_documents_on_both_legs(channel, indexed, flt):
    found = {}
    for mode in (common_pb2.RETRIEVAL_MODE_BM25, common_pb2.RETRIEVAL_MODE_VECTOR):
        code, details, reply = search(channel, query="glacier ice melt note", collection="legs", top_k=100,
                                      mode=mode, effort=common_pb2.EFFORT_FAST, filters=[flt])
        assert code == grpc.StatusCode.OK, details
        found[mode] = {h.doc_id for h in reply.hits}
    expected = {d.id for d in indexed if _selects(flt, dict(d.metadata))}
    assert found[common_pb2.RETRIEVAL_MODE_BM25] == found[common_pb2.RETRIEVAL_MODE_VECTOR] == expected


def _selects(flt, metadata):
    from hybridsearch.contract.validation import matches_filters

    return matches_filters(metadata, [flt])


def test_a_stream_that_fails_half_way_says_what_it_committed(channel, stack):
    ok = ingest_pb2.UpsertRequest(collection="stream", documents=[
        ingest_pb2.Document(id="s1", text="first batch"), ingest_pb2.Document(id="s2", text="first batch too")])
    # An id no ASCII header can carry (found by the fuzz: the trailer was INTERNAL "Invalid metadata").
    emoji = ingest_pb2.UpsertRequest(collection="stream", documents=[ingest_pb2.Document(id="\U0001f600\x00", text="x")])
    code, details, trailing = stream(channel, [emoji.SerializeToString(), BAD_UTF8])
    assert code == grpc.StatusCode.INVALID_ARGUMENT and trailing["last-committed-id-bin"] == "\U0001f600\x00".encode()
    bad = ingest_pb2.UpsertRequest(collection="stream", documents=[ingest_pb2.Document(id="s3\n", text="x")])
    code, details, trailing = stream(channel, [ok.SerializeToString(), bad.SerializeToString()])
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert "(1 earlier batch was committed (2 documents, the last 's2'))" in details
    assert trailing == {"committed-batches": "1", "committed-documents": "2", "last-committed-id-bin": b"s2"}
    code, details, trailing = stream(channel, [BAD_UTF8])
    assert "nothing of this stream was committed" in details and trailing["committed-batches"] == "0"
    with gateway_client(stack) as client:
        assert {s.documents for s in client.stats("stream").stores} == {3}


# --- the fuzz -----------------------------------------------------------------------------------------

FRAGMENTS = [
    "AND", "OR", "NOT", "(", ")", '"', "*", "~", "^", ":", "\\", "?", "+", "-", "!", "{", "}", "[", "]", "/", "&&", "||",
    'title:"ice"~2^3', "a*b?c", "(x OR (y AND NOT z))", '{"query": {"match_all": {}}}', '[1, {"a": null}]', "}{",
    "'; DROP TABLE chunks; --", "1 OR 1=1", "%s%n", "${jndi:x}", "\x00", "\x00\x01\x7f", "\U0001d518\U0001f600\U00010348",
    "\u202e\u05e9\u05dc\u05d5\u05dd \u0645\u0631\u062d\u0628\u0627", "e\u0301\u0302\u0303", "\u200b\ufeff", "\n", "\t",
    "\r\n", " ", "#", "meta.lang", "a..b", "ice", "glacier", "default", "\u0130\u0131\u00df",
]
LONG_STRINGS = {
    "query": ["q" * MAX_QUERY_CHARS, "q " * (MAX_QUERY_CHARS // 2), "q" * (MAX_QUERY_CHARS + 1)],
    "id": ["i" * MAX_DOC_ID_CHARS, "i" * (MAX_DOC_ID_CHARS + 1), "\U0001f600" * MAX_DOC_ID_CHARS],
    "key": ["k" * MAX_KEY_CHARS, "k" * (MAX_KEY_CHARS + 1)],
    "value": ["v" * MAX_VALUE_CHARS, "v" * (MAX_VALUE_CHARS + 1), "\U0001f600" * MAX_VALUE_CHARS],
    "title": ["t" * MAX_TITLE_CHARS, "t" * (MAX_TITLE_CHARS + 1)],
    # At the text limit as one word (one chunk: embedding 2,500 chunks would take minutes), and past it.
    "text": ["x" * MAX_TEXT_CHARS, "x" * (MAX_TEXT_CHARS + 1), "ice melt " * 2000],
}
def mostly(valid: st.SearchStrategy, hostile_values: st.SearchStrategy) -> st.SearchStrategy:
    """`valid` about seven times in eight, so that enough requests pass validation to reach the stores
    (st.one_of leans towards its later, wider branches)."""
    return st.sampled_from([False] * 7 + [True]).flatmap(lambda bad: hostile_values if bad else valid)


# Lists at their limits and one past: filters, metadata (keys, value bytes in all).
FILTER_LISTS_AT_LIMITS = [
    [common_pb2.MetadataFilter(field=f"k{i}", any_of=common_pb2.StringList(values=[f"v{j}" for j in range(n_values)]))
     for i in range(n_filters)]
    for n_filters, n_values in ((MAX_FILTERS, MAX_FILTER_VALUES), (MAX_FILTERS + 1, 1), (1, MAX_FILTER_VALUES + 1))
] + [[common_pb2.MetadataFilter(field="k", any_of=common_pb2.StringList(values=["v" * 1000] * 100))]]  # > 64 KiB
METADATA_AT_LIMITS = [
    {f"k{i}": "v" * 100 for i in range(MAX_METADATA_KEYS)},                     # 64 keys, 6.5 KiB
    {f"k{i}": "v" for i in range(MAX_METADATA_KEYS + 1)},                       # a key too many
    {f"k{i}": "v" * MAX_VALUE_CHARS for i in range(MAX_METADATA_BYTES // MAX_VALUE_CHARS)},  # bytes over
]
INT32 = st.one_of(st.integers(-3, 1100), st.sampled_from([-(2**31), 2**31 - 1, 1000, 1001]))
FLOATS = st.one_of(st.floats(-2, 2, width=32), st.sampled_from([float("nan"), float("inf"), float("-inf"), 1e30, -0.0]))


def hostile(kind: str) -> st.SearchStrategy[str]:
    """Strings for a field: short unicode (no surrogates), fragments joined, names, and `kind`'s limits."""
    unicode = st.text(st.characters(exclude_categories=("Cs",)), max_size=24)
    joined = st.lists(st.sampled_from(FRAGMENTS) | unicode, min_size=1, max_size=6).map(" ".join)
    names = st.from_regex(r"[A-Za-z0-9_-]{1,12}", fullmatch=True)
    return st.one_of(names, unicode, joined, st.sampled_from(FRAGMENTS), st.sampled_from(LONG_STRINGS.get(kind, [""])))


COLLECTIONS = mostly(st.sampled_from(["", "hostile", "fuzz", "fuzz-2", "a" * 63]),
                     st.one_of(st.sampled_from(["a" * 64, "Fuzz", "fuzz\n", "-x"]), hostile("collection")))
# Reads never create a collection, so they may name any valid one (Upsert keeps to a few: each new name is a new collection on disk).
READ_COLLECTIONS = mostly(st.one_of(st.sampled_from(["", "hostile", "legs"]),
                                    st.from_regex(r"[a-z0-9][a-z0-9_-]{0,62}", fullmatch=True)), COLLECTIONS)
IDS = mostly(st.sampled_from(["d0", "d1", "f1", "f2", "\U0001f600", "x\x00y"]),
             st.one_of(st.sampled_from(["x#1", "a b", "d\n"]), hostile("id")))
KEYS = mostly(st.sampled_from(["lang", "a-b", "_k", "k", "0"]), hostile("key"))
VALUES = st.one_of(st.sampled_from(["en", "fr", "0", "x"]), hostile("value"))
ENUMS = mostly(st.integers(0, 3), INT32)
LEG_NAMES = mostly(st.sampled_from([*legs.names(), "leg_99"]), hostile("key"))  # fusion weight keys


@st.composite
def filters(draw):
    field, which = draw(KEYS), draw(mostly(st.sampled_from(["equals", "any_of", "not_equals"]), st.none()))
    if which == "any_of":
        return common_pb2.MetadataFilter(field=field, any_of=common_pb2.StringList(values=draw(st.lists(VALUES, max_size=5))))
    return common_pb2.MetadataFilter(field=field, **({which: draw(VALUES)} if which else {}))


@st.composite
def search_requests(draw):
    request = search_pb2.SearchRequest(
        query=draw(hostile("query")), collection=draw(READ_COLLECTIONS), mode=draw(ENUMS), effort=draw(ENUMS),
        filters=draw(mostly(st.lists(filters(), max_size=3), st.sampled_from(FILTER_LISTS_AT_LIMITS))), min_score=draw(mostly(st.just(0.0), FLOATS)),
        explain=draw(st.booleans()), offset=draw(mostly(st.integers(0, 20), INT32)),
    )
    if draw(st.booleans()):
        request.top_k = draw(mostly(st.integers(1, 100), INT32))
    if draw(st.booleans()):
        request.rerank = draw(st.booleans())
    if draw(st.booleans()):
        request.fusion.CopyFrom(fusion_pb2.FusionConfig(
            method=draw(mostly(st.integers(0, 4), INT32)), rrf_k=draw(mostly(st.floats(0, 100), FLOATS)),
            bm25_weight=draw(mostly(st.floats(0, 1), FLOATS)), vector_weight=draw(mostly(st.floats(0, 1), FLOATS)),
            variant_weight=draw(FLOATS), hyde_weight=draw(FLOATS),
            leg_weights=draw(st.dictionaries(LEG_NAMES, mostly(st.floats(0, 1), FLOATS), max_size=5)),
            rrf_leg_weights=draw(st.dictionaries(LEG_NAMES, mostly(st.floats(0, 2), FLOATS), max_size=5))))
    return request


documents = st.builds(
    ingest_pb2.Document, id=IDS, title=hostile("title"), text=hostile("text"),
    metadata=mostly(st.dictionaries(KEYS, VALUES, max_size=4), st.sampled_from(METADATA_AT_LIMITS)),
)
# A batch of 1000 documents (one text: embedded once, the cache serves the rest) and one too many.
BATCHES_AT_LIMITS = [[ingest_pb2.Document(id=f"m{i}", text="the same text") for i in range(n)]
                     for n in (MAX_DOCUMENTS, MAX_DOCUMENTS + 1)]
upsert_requests = st.builds(ingest_pb2.UpsertRequest, collection=COLLECTIONS,
                            documents=mostly(st.lists(documents, max_size=3), st.sampled_from(BATCHES_AT_LIMITS)))
delete_requests = st.builds(ingest_pb2.DeleteRequest, collection=COLLECTIONS, ids=mostly(
    st.lists(IDS, max_size=5), st.sampled_from([[f"m{i}" for i in range(n)] for n in (MAX_DELETE_IDS, MAX_DELETE_IDS + 1)])))
stats_requests = st.builds(ingest_pb2.StatsRequest, collection=READ_COLLECTIONS)
TYPED = {SEARCH: search_requests(), UPSERT: upsert_requests, DELETE: delete_requests, STATS: stats_requests}


@st.composite
def raw_bytes(draw):
    """(method, bytes): garbage, a valid message cut short, or one with a byte changed (often invalid UTF-8)."""
    method = draw(st.sampled_from([SEARCH, UPSERT, DELETE, STATS, STREAM]))
    how = draw(st.sampled_from(["garbage", "truncated", "mutated"]))
    if how == "garbage":
        return method, draw(st.binary(max_size=64))
    valid = draw(TYPED[UPSERT if method == STREAM else method]).SerializeToString()
    if not valid:
        return method, BAD_UTF8
    at = draw(st.integers(0, len(valid) - 1))
    if how == "truncated":
        return method, valid[:at]
    return method, valid[:at] + bytes([draw(st.sampled_from([0xFF, 0xC0, 0x80, 0xED, 0x00]))]) + valid[at + 1:]


def fuzz_settings(share: float):
    return settings(max_examples=max(1, round(CASES * share)), deadline=None, derandomize=True, database=None,
                    suppress_health_check=list(HealthCheck), print_blob=True)


def check(rpc: str, code: grpc.StatusCode, details: str, raw: bool = False) -> None:
    COUNTS[(("raw " if raw else "") + rpc.rsplit("/", 1)[-1], code.name)] += 1
    assert code in ALLOWED_BY_RPC.get(rpc, ALLOWED), f"{rpc} answered {code.name}: {details[:500]}"
    if code == grpc.StatusCode.NOT_FOUND:
        assert details.startswith(("collection '", "none of the collections exists")), details


# Shares of the cases: the RPCs by what they cost, raw bytes a quarter.
SHARES = {SEARCH: 0.35, UPSERT: 0.15, DELETE: 0.1, STATS: 0.1, "raw": 0.25, STREAM: 0.05}
TIMEOUT_S = max(600, CASES * 0.5)


@pytest.mark.timeout(TIMEOUT_S)
@pytest.mark.parametrize("rpc", [SEARCH, UPSERT, DELETE, STATS])
def test_fuzz_typed(channel, indexed, rpc):
    @fuzz_settings(SHARES[rpc])
    @given(TYPED[rpc])
    def run(request):
        code, details, _ = call(channel, rpc, request.SerializeToString())
        check(rpc, code, details)

    run()


@pytest.mark.timeout(TIMEOUT_S)
def test_fuzz_stream(channel, indexed):
    @fuzz_settings(SHARES[STREAM])
    @given(st.lists(st.one_of(upsert_requests.map(lambda r: r.SerializeToString()), raw_bytes().map(lambda m: m[1])),
                    min_size=1, max_size=3))
    def run(messages):
        code, details, _ = stream(channel, messages)
        check(STREAM, code, details)

    run()


@pytest.mark.timeout(TIMEOUT_S)
def test_fuzz_raw_bytes(channel, indexed):
    @fuzz_settings(SHARES["raw"])
    @given(raw_bytes())
    def run(case):
        method, data = case
        code, details = (stream(channel, [data]) if method == STREAM else call(channel, method, data))[:2]
        check(method, code, details, raw=True)

    run()


def test_every_process_survived_the_fuzz(stack, tmp_path_factory):
    """Last in the module: after every case, each process is the one started (none died) and serves."""
    counts = {f"{rpc} {code}": n for (rpc, code), n in sorted(COUNTS.items())}
    report = os.environ.get("HYBRIDSEARCH_FUZZ_REPORT") or str(tmp_path_factory.getbasetemp() / "fuzz-report.json")
    with open(report, "w") as out:
        json.dump({"cases": sum(COUNTS.values()), "counts": counts}, out, indent=1)
    print(f"\nfuzz: {sum(COUNTS.values())} cases by RPC and status code ({report}):")
    for key, n in counts.items():
        print(f"  {key:40s} {n}")
    assert STARTED_PIDS and process_ids(stack) == STARTED_PIDS, "a process of the stack died (or was restarted)"
    for service in services.NAMES:
        assert grpc_healthy(stack.settings.endpoints.addr(service), timeout=5.0), f"{service} no longer serves"

