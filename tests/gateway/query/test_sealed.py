"""Sealed at rest through the real stack (issue 26; gateway/query/sealed.py, security/sealing.py): a sealed collection
is written and searched (the right answer, readable previews, titles and tags, filters, the tag leg, boosts,
paging, expansion; hits' metadata, path, citations and context chunks opened for the page), read back whole
(GetDocuments opens it) and dropped, a sealed collection without its key and a wrong key fail with
FAILED_PRECONDITION and the reason, and once the stack has stopped (Redis saved first) every file under the data dir is read byte by
byte: none of the sealed collection's words, titles, tags or metadata values is there in clear, except its
words as terms in the BM25 term dictionary (the default mode: docs/security.md). A plain collection with
words of the same shape, written and searched alongside, is found by the same scan: the scan can fail."""

from __future__ import annotations

import base64
import json
import time
from contextlib import contextmanager
from pathlib import Path

import pytest
import redis
import tantivy
import yaml
from stacks import STACK_ENV, redis_at_rest, running_stack, stack_env_on

from hybridsearch.bm25.analyzer import EnglishAnalyzer
from hybridsearch.client import GatewayClient
from hybridsearch.client.errors import FailedPrecondition, NotFound
from hybridsearch.security.keys_file import create_collection_key
from hybridsearch.expansion import cache as expansion_cache
from hybridsearch.gateway.query import paging
from hybridsearch.v1 import common_pb2, ingest_pb2, search_pb2

pytestmark = [pytest.mark.stack, pytest.mark.timeout(900)]

DECLARED = {"tag_leg": True, "tags_field": "topics",
            "boosts": [{"field": "type", "value": "decision", "fusion": 1.3, "rerank": 1.25}]}
SEALED, PLAIN, NO_KEY, DROPPED = "vault", "vault-plain", "vault-nokey", "vault-drop"


class Words:
    """A collection's marker words: body words, a title word, a tag and a metadata value, each unique."""

    def __init__(self, prefix: str) -> None:
        self.body = (f"{prefix}quorblex", f"{prefix}flemvarn", f"{prefix}strindolk")
        self.title = f"{prefix}titlewort"
        self.tag = f"{prefix}tagmarq"
        self.owner = f"{prefix}ownerzed"
        self.path = f"{prefix}pathdir/app.py"  # a reader's path: a metadata value like the others
        self.code = f"{prefix}betaword"  # the source document's middle section

    def source(self) -> ingest_pb2.Document:
        """A source file as a reader sends it: three sections (functions), path/type/modified metadata."""
        blocks = ["def alpha():\n    return 1", f"def beta(count):\n    return count * {self.code}",
                  "def gamma():\n    return 3"]
        text = "\n\n\n".join(blocks) + "\n"
        starts = [text.index(b) for b in blocks]
        return ingest_pb2.Document(
            id="src", title=f"{self.title} source", text=text,
            metadata={"path": self.path, "type": "py", "modified": "2024-05-01T00:00:00+00:00"},
            sections=[ingest_pb2.DocumentSection(start=start, end=start + len(b), heading=f"def {name}",
                                                 metadata={"symbol": name, "symbol_kind": "def"})
                      for start, b, name in zip(starts, blocks, ("alpha", "beta", "gamma"))])

    def documents(self) -> list[ingest_pb2.Document]:
        b = self.body
        return [ingest_pb2.Document(
            id=f"doc-{i}", title=f"{self.title} memo number {i}",
            text=f"Memo {i}: {b[i % 3]} harbour ledger and {b[(i + 1) % 3]} rules. " + "Plain filler words here. " * 3,
            metadata={"topics": f"{self.tag}-{i % 2},common", "owner": f"{self.owner}{i % 2}",
                      "type": "decision" if i == 4 else "note"})
            for i in range(6)]

    @property
    def in_clear(self) -> list[str]:
        """What must not be at rest in clear: the words, full titles, tags and metadata values."""
        return [*self.body, f"{self.title} memo number", f"{self.tag}-0", f"{self.tag}-1", f"{self.owner}0",
                f"{self.owner}1", self.path]


SEALED_WORDS, PLAIN_WORDS = Words("zyx"), Words("qwk")


@contextmanager
def sealed_stack(data_dir: Path, ports: tuple[str, str, str], declared: dict[str, dict], keyed: tuple[str, ...]):
    """A stack on ports of its own (stack_env_on's families) whose collections are the shared ones plus
    `declared`, with a key made for each collection in `keyed` before it starts."""
    collections = {**json.loads(STACK_ENV["HYBRIDSEARCH_COLLECTIONS"]), **declared}
    env = {**stack_env_on(*ports), "HYBRIDSEARCH_DATA_DIR": str(data_dir), "HYBRIDSEARCH_COLLECTIONS": json.dumps(collections)}
    for name in keyed:
        create_collection_key(data_dir / "sealing" / "keys.yaml", name)
    with running_stack(env) as running:
        yield running


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    declared = {SEALED: {**DECLARED, "sealed": True}, PLAIN: DECLARED, NO_KEY: {"sealed": True}, DROPPED: {"sealed": True}}
    with sealed_stack(tmp_path_factory.mktemp("sealed"), ("2445", "2617", "2815"), declared, (SEALED, DROPPED)) as running:
        yield running


@pytest.fixture(scope="module")
def client(stack):
    client = GatewayClient(stack.settings.endpoints.addr("gateway"))
    for collection, words in ((SEALED, SEALED_WORDS), (PLAIN, PLAIN_WORDS)):
        assert client.upsert(collection, words.documents()).documents_written == 6
        assert client.upsert(collection, [words.source()]).documents_written == 1
    yield client
    client.close()


def search(client, collection: str, query: str, **fields) -> search_pb2.SearchResponse:
    return client.search(search_pb2.SearchRequest(query=query, collection=collection, **fields))


@pytest.mark.parametrize("collection,words", [(SEALED, SEALED_WORDS), (PLAIN, PLAIN_WORDS)])
def test_a_sealed_collection_answers_like_a_plain_one(client, collection, words):
    word = words.body[1]  # in doc-0 (second word), doc-1 (first), doc-3, doc-4
    bm25 = dict(effort=common_pb2.EFFORT_FAST, mode=common_pb2.RETRIEVAL_MODE_BM25)
    lexical = search(client, collection, word, top_k=10, **bm25)
    assert sorted(h.doc_id for h in lexical.hits) == ["doc-0", "doc-1", "doc-3", "doc-4"]
    for hit in lexical.hits:  # previews, titles and tags readable to the caller
        assert hit.title.startswith(f"{words.title} memo number") and word in hit.snippet and "<mark>" in hit.marked_snippet
    assert {f"{words.tag}-0", f"{words.tag}-1"} <= set(lexical.tag_counts)
    hybrid = search(client, collection, word, top_k=10, effort=common_pb2.EFFORT_FAST)  # the vector leg's hits too
    assert len(hybrid.hits) == 7 and all(h.title.startswith(words.title) and h.snippet for h in hybrid.hits)
    assert hybrid.hits[0].doc_id in {"doc-0", "doc-1", "doc-3", "doc-4"}
    # filters on metadata values, equality and any_of
    owned = search(client, collection, word, filters=[common_pb2.MetadataFilter(field="owner", equals=f"{words.owner}1")],
                   **bm25)
    assert sorted(h.doc_id for h in owned.hits) == ["doc-1", "doc-3"]
    either = search(client, collection, word, filters=[common_pb2.MetadataFilter(
        field="topics", any_of=common_pb2.StringList(values=[f"{words.tag}-0,common"]))], **bm25)
    assert sorted(h.doc_id for h in either.hits) == ["doc-0", "doc-4"]
    # the tag leg matches the query's keywords against the (hashed) tags
    tagged = search(client, collection, f"{words.tag}-1", effort=common_pb2.EFFORT_FAST)
    tag_hits = {h.doc_id for h in tagged.hits if any(r.leg == common_pb2.LEG_TAG for r in h.legs)}
    assert tag_hits == {"doc-1", "doc-3", "doc-5"}
    # a boost on a metadata value (type=decision: doc-4) applies on hashed values too
    boosted = search(client, collection, word, effort=common_pb2.EFFORT_FAST, explain=True)
    assert [b.doc_id for b in boosted.explain.boosts] == ["doc-4"]
    # BALANCED expands (feedback read from the opened probe texts) and pages follow the first order
    first = search(client, collection, f"{word} harbour", top_k=2, explain=True)
    assert first.next_page_token and first.explain.lexical_variants
    second = search(client, collection, f"{word} harbour", top_k=2, page_token=first.next_page_token)
    assert second.hits and all(h.title.startswith(words.title) and h.snippet for h in second.hits)
    assert not {h.doc_id for h in first.hits} & {h.doc_id for h in second.hits}


@pytest.mark.parametrize("collection,words", [(SEALED, SEALED_WORDS), (PLAIN, PLAIN_WORDS)])
def test_hits_show_and_cite_their_opened_metadata_and_context(client, collection, words):
    """The page's metadata, path/type/modified, citation and neighbouring chunks: a sealed collection's opened
    for the page (the legs bring keyed hashes), the same as a plain one's."""
    answer = search(client, collection, words.code, effort=common_pb2.EFFORT_FAST, mode=common_pb2.RETRIEVAL_MODE_BM25,
                    return_metadata=["symbol", "owner"], context=1)
    top = answer.hits[0]
    assert (top.doc_id, top.path, top.type, top.modified) == ("src", words.path, "py", "2024-05-01T00:00:00+00:00")
    assert dict(top.metadata) == {"symbol": "beta"}
    assert (top.citation.chunk.start_line, top.citation.chunk.end_line) == (5, 6)
    text = words.source().text
    chunk = text[top.citation.chunk.start_char:top.citation.chunk.end_char]
    assert chunk.startswith("def beta") and chunk[top.citation.snippet.start:top.citation.snippet.end].split() == \
        top.snippet.split()
    [before], [after] = top.context_before, top.context_after
    assert "def alpha" in before.text and (before.span.start_line, before.span.end_line) == (1, 2)
    assert "def gamma" in after.text and before.heading == "def alpha"
    memos = search(client, collection, words.body[1], effort=common_pb2.EFFORT_FAST,
                   mode=common_pb2.RETRIEVAL_MODE_BM25, return_metadata=["owner", "type"], top_k=10)
    for hit in memos.hits:
        i = int(hit.doc_id.split("-")[1])
        assert dict(hit.metadata) == {"owner": f"{words.owner}{i % 2}", "type": "decision" if i == 4 else "note"}
        assert hit.type == ("decision" if i == 4 else "note")


@pytest.mark.parametrize("collection,words", [(SEALED, SEALED_WORDS), (PLAIN, PLAIN_WORDS)])
def test_get_documents_gives_the_opened_documents(client, collection, words):
    reply = client.get_documents(collection, ["doc-1", "src", "nope"])
    memo, source = reply.documents
    original = words.documents()[1]
    assert (memo.id, memo.title, memo.text) == ("doc-1", original.title, original.text.strip())
    assert dict(memo.metadata) == dict(original.metadata)
    assert words.code in source.text and source.metadata["path"] == words.path and list(reply.missing) == ["nope"]


def test_a_sealed_collection_without_its_key_is_a_clear_failed_precondition(client):
    doc = ingest_pb2.Document(id="x", text="anything at all")
    with pytest.raises(FailedPrecondition, match=f"collection '{NO_KEY}' is sealed and has no key"):
        client.upsert(NO_KEY, [doc])
    with pytest.raises(FailedPrecondition, match="keys create -c vault-nokey"):
        search(client, NO_KEY, "anything")
    with pytest.raises(FailedPrecondition, match="keys create -c vault-nokey"):
        client.get_documents(NO_KEY, ["x"])


def test_a_sealed_collection_drops_with_its_redis_entries_and_keeps_its_key(stack, client):
    assert client.upsert(DROPPED, SEALED_WORDS.documents()).documents_written == 6
    search(client, DROPPED, f"{SEALED_WORDS.body[0]} harbour", top_k=2)  # BALANCED: an expansion, a kept order
    r = redis.Redis.from_url(stack.settings.redis.cache_at)
    try:
        deadline = time.monotonic() + 5  # the page order is written after the answer
        while not r.keys(paging.collection_pattern(DROPPED)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert r.keys(paging.collection_pattern(DROPPED))
        expansions = r.keys(expansion_cache.collection_pattern(DROPPED))
        assert len(expansions) == 1  # main's layout, the digest keyed (HMAC)
        dropped = client.drop_collection(DROPPED)
        assert (dropped.existed, dropped.documents) == (True, 6) and dropped.cache_entries >= 2
        assert not r.keys(f"*{DROPPED}*")
    finally:
        r.close()
    with pytest.raises(NotFound):
        search(client, DROPPED, SEALED_WORDS.body[0])
    keys = yaml.safe_load((stack.settings.data_dir / "sealing" / "keys.yaml").read_text())["collections"]
    assert DROPPED in keys  # the key stays: the operator removes it (docs/security.md)


def test_a_wrong_key_is_a_clear_failed_precondition_never_garbage(stack, client):
    path = stack.settings.data_dir / "sealing" / "keys.yaml"
    kept = path.read_text()
    raw = yaml.safe_load(kept)
    entry = raw["collections"][SEALED]
    entry["keys"][entry["active"]] = base64.b64encode(b"w" * 32).decode()  # another key under the same id
    path.write_text(yaml.safe_dump(raw))
    try:
        with pytest.raises(FailedPrecondition, match="does not open with key"):
            search(client, SEALED, SEALED_WORDS.body[0], effort=common_pb2.EFFORT_FAST)
    finally:
        path.write_text(kept)
    assert search(client, SEALED, SEALED_WORDS.body[0], effort=common_pb2.EFFORT_FAST).hits  # the right key again


def files_holding(root: Path, needle: str) -> set[str]:
    data = needle.encode()
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and data in p.read_bytes()}


def stored_records(index_dir: Path) -> bytes:
    """Every stored payload of a tantivy index, decompressed (what its document store holds)."""
    searcher = tantivy.Index.open(str(index_dir)).searcher()
    hits = searcher.search(tantivy.Query.all_query(), max(1, searcher.num_docs)).hits
    return b"\n".join(bytes(searcher.doc(addr)["payload"][0]) for _, addr in hits)


def test_nothing_of_a_sealed_collection_is_at_rest_in_clear(stack, client):
    """Runs last: saves Redis, stops the stack, reads every file under the data dir."""
    settings = stack.settings
    search(client, SEALED, f"{SEALED_WORDS.body[2]} harbour", top_k=2)  # an expansion cache entry and a kept order
    search(client, PLAIN, f"{PLAIN_WORDS.body[2]} harbour", top_k=2)
    keys, values = redis_at_rest(settings)  # live, uncompressed; and the dumps (their strings may be LZF-compressed)
    assert any(k.startswith(f"hybridsearch:expansion:{SEALED}:".encode()) for k in keys)  # the collection's layout
    assert PLAIN_WORDS.body[2].encode() in values  # the plain collection's expansion entry holds its query
    for marker in SEALED_WORDS.in_clear:
        assert marker.encode() not in values, marker
    stack.stop()
    root = settings.data_dir
    assert any(root.rglob("dump.rdb"))
    bm25_dir = root / "bm25-tantivy" / SEALED
    term_files = {str(p.relative_to(root)) for p in bm25_dir.glob("*.term")}
    analyzer = EnglishAnalyzer(settings.bm25.stemmer, settings.bm25.stopwords)
    searcher = tantivy.Index.open(str(bm25_dir)).searcher()
    for word in SEALED_WORDS.body + (SEALED_WORDS.title,):
        # the default mode keeps the words as BM25 terms: in the term dictionary, nowhere else
        (term,) = analyzer.analyze(word)
        assert searcher.doc_freq("body", term) > 0
        assert files_holding(root, word) <= term_files, word
    for marker in SEALED_WORDS.in_clear[3:]:  # full titles, tags, metadata values: nowhere at all
        assert files_holding(root, marker) == set(), marker
    # tantivy compresses its document store, so a byte scan cannot see into it: its stored records are read
    # back decompressed too, the sealed collection's holding none of its words, the plain one's all of them
    sealed_records, plain_records = stored_records(bm25_dir), stored_records(root / "bm25-tantivy" / PLAIN)
    for marker in SEALED_WORDS.in_clear:
        assert marker.encode() not in sealed_records, marker
    assert b'"sealed"' in sealed_records and b'"text"' not in sealed_records
    for marker in PLAIN_WORDS.in_clear:
        assert marker.encode() in plain_records, marker
    # the byte scan finds the plain collection's words in the vector store's payloads
    for word in PLAIN_WORDS.in_clear:
        assert any(f.startswith(f"qdrant-edge/{PLAIN}/") for f in files_holding(root, word)), word
    # and no collection key is in any log
    secret = yaml.safe_load((root / "sealing" / "keys.yaml").read_text())["collections"][SEALED]
    key = secret["keys"][secret["active"]]
    assert not {f for f in files_holding(root, key) if not f.startswith("sealing/")}
