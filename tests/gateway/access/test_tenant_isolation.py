"""Tenant isolation through the real gateway (issue 23): two tenants, `pa-*` and `pb-*`, each with
documents full of private marker words, and every read and write path one tenant could use to reach
the other's data: several collections in one search, page tokens, the expansion cache, the typo
vocabulary, link expansion, explain, tag counts, Stats, Upsert, UpsertStream, Delete, and the collections
as resources (GetDocuments, ListCollections, DropCollection).

Both directions, every time: nothing of the other tenant appears in an answer (every byte of the
serialized response is scanned for its words, ids and collection names), and nothing of it changes."""

from __future__ import annotations

from contextlib import closing

import grpc
import pytest
from stacks import running_stack, stack_env_on

from hybridsearch.client import GatewayClient, explain_lines
from hybridsearch.security.apikeys import create_key
from hybridsearch.v1 import ingest_pb2, search_pb2, search_pb2_grpc

pytestmark = [pytest.mark.stack, pytest.mark.timeout(600)]
DENIED, UNAUTH, INVALID = (grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.UNAUTHENTICATED,
                           grpc.StatusCode.INVALID_ARGUMENT)
SHARED = "harbor ledger"  # words both tenants' documents hold: the same query reaches both collections


class Tenant:
    """A tenant's key, client, collections and what only it has (its words, ids, tags)."""

    def __init__(self, name: str, client: GatewayClient, key: str, words: tuple[str, ...]) -> None:
        self.name, self.client, self.key, self.words = name, client, key, words
        self.docs, self.wiki = f"p{name}-docs", f"p{name}-wiki"
        self.tag = f"{words[0]}-tag"

    @property
    def markers(self) -> tuple[str, ...]:
        """What no answer to another tenant may hold: its words, its ids' prefix, its collections."""
        return (*self.words, f"{self.name}-doc-", f"p{self.name}-")

    def documents(self) -> list[ingest_pb2.Document]:
        w = self.words
        docs = [ingest_pb2.Document(
            id=f"{self.name}-doc-{i}", title=f"{w[i % 3]} {SHARED} {i}",
            text=f"The {SHARED} of tenant {self.name}: {w[0]} {w[1]} {w[2]} entry {i}. {w[i % 3]} {w[0]} "
                 f"records {SHARED} details, {w[(i + 1) % 3]} and more {w[1]}.",
            metadata={"tags": f"{self.tag},harbor", "links": f"{self.name}-doc-{(i + 1) % 5},same-id"})
            for i in range(5)]
        # The same id in both collections, and a link to an id that only the other tenant has.
        other = "b" if self.name == "a" else "a"
        docs.append(ingest_pb2.Document(id="same-id", title=f"{w[2]} shared id",
                                        text=f"{SHARED} kept by tenant {self.name}: {w[2]} {w[0]}",
                                        metadata={"tags": self.tag, "links": f"{other}-doc-0"}))
        return docs


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    env = {**stack_env_on("2605", "2657", "2880"), "HYBRIDSEARCH_DATA_DIR": str(tmp_path_factory.mktemp("tenants"))}
    with running_stack(env) as running:
        yield running


@pytest.fixture(scope="module")
def tenants(stack):
    keys_file = stack.settings.data_dir / "auth" / "keys.yaml"
    address = stack.settings.endpoints.addr("gateway")
    made = {}
    for name, words in (("a", ("alpenglow", "brisket", "cormorant")), ("b", ("zorbulax", "quentrix", "vellumcrisp"))):
        key, _ = create_key(keys_file, f"tenant-{name}", [f"p{name}-*"], [f"p{name}-*"])
        made[name] = Tenant(name, GatewayClient(address, api_key=key), key, words)
    for tenant in made.values():
        assert tenant.client.upsert(tenant.docs, tenant.documents()).documents_received == 6
        assert tenant.client.upsert(tenant.wiki, [ingest_pb2.Document(
            id=f"{tenant.name}-doc-wiki", text=f"{SHARED} wiki page of {tenant.words[1]}")]).documents_received == 1
    yield made["a"], made["b"]
    for tenant in made.values():
        tenant.client.close()


def both_ways(tenants):
    a, b = tenants
    return [(a, b), (b, a)]


def leaked(message, victim: Tenant) -> list[str]:
    """The victim's markers found anywhere in a response's bytes (every string field is there verbatim)."""
    data = message.SerializeToString()
    return [m for m in victim.markers if m.encode() in data]


def refused(call) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.RpcError) as err:
        call()
    return err.value.code(), err.value.details()


def search(tenant: Tenant, query: str = SHARED, **fields) -> search_pb2.SearchResponse:
    fields.setdefault("collection", tenant.docs)
    return tenant.client.search(search_pb2.SearchRequest(query=query, **fields), timeout=60)


def state(tenant: Tenant) -> tuple:
    """What a tenant's collections hold, read with its own key: store counts and every document's id and title."""
    out = []
    for collection in (tenant.docs, tenant.wiki):
        stats = tenant.client.stats(collection)
        hits = search(tenant, SHARED, collection=collection, top_k=50, mode=1, effort=1)  # BM25, FAST
        out.append((sorted((s.store, s.documents, s.chunks) for s in stats.stores),
                    sorted((h.doc_id, h.title) for h in hits.hits)))
    return tuple(out)


# Reads ---------------------------------------------------------------------------------------------

def test_a_search_naming_the_other_tenants_collection_is_refused(tenants):
    for me, other in both_ways(tenants):
        cases = [
            dict(collection=me.docs, collections=[me.docs, other.docs]),  # the request of issue 23
            dict(collections=[other.docs, me.docs]),                      # empty collection: not "default"
            dict(collection=other.docs),
            dict(collections=[me.docs, me.wiki, other.wiki]),
        ]
        for fields in cases:
            code, details = refused(lambda: search(me, **{"collection": "", **fields}))
            refused_name = next(c for c in [fields.get("collection", ""), *fields.get("collections", [])]
                                if c.startswith(f"p{other.name}-"))
            assert code == DENIED, (fields, details)
            assert f"may not read collection '{refused_name}'" in details


def test_a_tenant_searches_its_own_collections_together_without_default(tenants):
    """Neither key may read `default`: an empty collection beside `collections` must not be taken for it."""
    for me, other in both_ways(tenants):
        reply = search(me, collection="", collections=[me.docs, me.wiki], top_k=20, explain=True)
        assert {h.collection for h in reply.hits} == {me.docs, me.wiki}
        assert not leaked(reply, other)
        assert refused(lambda: search(me, collection=""))[0] == DENIED  # `default` alone stays refused


def test_the_other_tenants_page_token_is_refused_on_every_page(tenants):
    for me, other in both_ways(tenants):
        first = search(other, top_k=2, effort=1)
        second = search(other, top_k=2, effort=1, page_token=first.next_page_token)
        assert first.next_page_token and second.next_page_token  # a later page's token: reissued by the gateway
        for token in (first.next_page_token, second.next_page_token):
            for fields in (dict(collection=me.docs), dict(collections=[me.docs, me.wiki])):
                code, details = refused(lambda: search(me, top_k=2, effort=1, page_token=token,
                                                       **{"collection": "", **fields}))
                assert code == DENIED and f"may not read collection '{other.docs}'" in details, (fields, details)
        # A tenant's own pages keep working.
        mine = search(me, top_k=2, effort=1)
        later = search(me, top_k=2, effort=1, page_token=mine.next_page_token)
        assert later.hits and not leaked(later, other)


def test_a_token_does_not_move_to_another_collection_even_for_a_key_that_reads_both(stack, tenants):
    """Past the access check the servicer still binds a token to its query and collections."""
    a, b = tenants
    token = search(b, top_k=2, effort=1).next_page_token
    with closing(GatewayClient(stack.settings.endpoints.addr("gateway"))) as admin:  # the stack's admin key
        code, details = refused(lambda: admin.search(search_pb2.SearchRequest(
            query=SHARED, collection=a.docs, top_k=2, effort=1, page_token=token), timeout=60))
    assert code == INVALID and "another query" in details


def test_the_expansion_cache_is_per_collection(tenants):
    """The same expanded query, first by one tenant (its variants come from its documents and are cached),
    then by the other: a cache miss, and variants of its own documents only."""
    for me, other in both_ways(tenants):
        query = f"{SHARED} records {me.name}"  # each direction its own query: both start cold
        theirs = search(other, query, effort=2, expand=True, explain=True)
        # The other's variants hold its private words: a shared cache entry would show them.
        assert not theirs.explain.expansion_cache_hit
        assert any(w in " ".join(theirs.explain.lexical_variants) for w in other.words), explain_lines(theirs)
        for attempt in range(2):  # a miss, then its own cache entry
            mine = search(me, query, effort=2, expand=True, explain=True)
            assert not leaked(mine, other), (leaked(mine, other), list(mine.explain.lexical_variants))
            assert mine.explain.expansion_cache_hit == bool(attempt)


def test_the_typo_vocabulary_is_per_collection(tenants):
    """A misspelling of the other tenant's word corrects to it in the other's collection only."""
    for me, other in both_ways(tenants):
        typo = other.words[0][:-2] + ("i" if other.words[0][-2] != "i" else "e") + other.words[0][-1]
        theirs = search(other, typo, fuzzy=True, effort=1)
        assert theirs.hits and {h.doc_id for h in theirs.hits} <= {*(f"{other.name}-doc-{i}" for i in range(5)), "same-id"}
        for effort in (1, 2):  # FAST, and BALANCED with expansion (its probe is fuzzy too)
            mine = search(me, f"{typo} {SHARED}", fuzzy=True, effort=effort, expand=effort == 2, explain=True)
            assert not leaked(mine, other), leaked(mine, other)
            assert all(h.collection in ("", me.docs) for h in mine.hits)


def test_link_expansion_stays_in_the_collection(tenants):
    """Each tenant links to an id only the other holds and shares an id with it: neither crosses over."""
    for me, other in both_ways(tenants):
        reply = search(me, f"{me.words[2]} shared id", graph=True, explain=True, top_k=20, effort=1)
        assert reply.hits and not leaked(reply, other), leaked(reply, other)
        same = [h for h in reply.hits if h.doc_id == "same-id"]
        assert same and all(me.words[2] in (h.title + h.snippet) for h in same)


def test_explain_and_tag_counts_hold_only_the_tenants_own(tenants):
    for me, other in both_ways(tenants):
        reply = search(me, top_k=20, explain=True, effort=3, expand=True, graph=True)
        assert reply.hits and reply.explain.fusion_order and not leaked(reply, other), leaked(reply, other)
        assert set(reply.tag_counts) <= {me.tag, "harbor"} and reply.tag_counts[me.tag] > 0


def test_stats_of_the_other_tenants_collection_is_refused(tenants):
    for me, other in both_ways(tenants):
        code, details = refused(lambda: me.client.stats(other.docs))
        assert code == DENIED and f"may not read collection '{other.docs}'" in details
        own = me.client.stats(me.docs)
        assert own.collection == me.docs and not leaked(own, other)
        assert all(s.documents == 6 for s in own.stores)


def test_documents_of_the_other_tenant_cannot_be_fetched(tenants):
    for me, other in both_ways(tenants):
        for collection in (other.docs, other.wiki):
            code, details = refused(lambda: me.client.get_documents(collection, [f"{other.name}-doc-0", "same-id"]))
            assert code == DENIED and f"may not read collection '{collection}'" in details
        # The same id in both collections: a tenant gets its own copy (its links name the other's id by design).
        own = me.client.get_documents(me.docs, ["same-id", f"{other.name}-doc-0"])
        assert [d.id for d in own.documents] == ["same-id"] and list(own.missing) == [f"{other.name}-doc-0"]
        assert me.words[2] in own.documents[0].text and not any(w in str(own) for w in other.words)


def test_list_collections_shows_only_the_tenants_own(stack, tenants):
    for me, other in both_ways(tenants):
        listed = me.client.list_collections()
        assert {c.name for c in listed.collections} == {me.docs, me.wiki}
        assert not leaked(listed, other)
    a, b = tenants
    with closing(GatewayClient(stack.settings.endpoints.addr("gateway"))) as admin:  # the admin key reads all
        assert {a.docs, a.wiki, b.docs, b.wiki} <= {c.name for c in admin.list_collections().collections}


def test_two_authorization_headers_are_refused(stack, tenants):
    a, b = tenants
    with grpc.insecure_channel(stack.settings.endpoints.addr("gateway")) as channel:
        stub = search_pb2_grpc.SearchServiceStub(channel)
        for keys in ((a.key, b.key), (b.key, a.key), (b.key, b.key)):
            metadata = tuple(("authorization", f"Bearer {key}") for key in keys)
            code, details = refused(lambda: stub.Search(search_pb2.SearchRequest(query=SHARED, collection=b.docs),
                                                        metadata=metadata, timeout=30))
            assert code == UNAUTH and "more than one authorization header" in details


# Writes --------------------------------------------------------------------------------------------

def test_writes_to_the_other_tenants_collections_are_refused_and_change_nothing(tenants):
    for me, other in both_ways(tenants):
        before = state(other)
        intruder = ingest_pb2.Document(id=f"{other.name}-doc-0", title="overwritten", text="intruder text")

        def stream():
            yield ingest_pb2.UpsertRequest(collection=me.docs, documents=[
                ingest_pb2.Document(id=f"{me.name}-doc-stream", text=f"{SHARED} streamed by {me.words[0]}")])
            yield ingest_pb2.UpsertRequest(collection=other.docs, documents=[intruder])

        calls = [
            lambda: me.client.upsert(other.docs, [intruder]),
            lambda: me.client.upsert(other.wiki, [intruder]),
            lambda: me.client.ingest_stub.UpsertStream(stream(), timeout=120),
            lambda: me.client.delete(other.docs, [f"{other.name}-doc-{i}" for i in range(5)] + ["same-id"]),
            lambda: me.client.delete(other.wiki, [f"{other.name}-doc-wiki"]),
            lambda: me.client.drop_collection(other.docs),
            lambda: me.client.drop_collection(other.wiki),
        ]
        for call in calls:
            code, details = refused(call)
            assert code == DENIED and f"may not write collection 'p{other.name}-" in details, details
        assert state(other) == before
        assert "intruder" not in str(state(other))
        me.client.delete(me.docs, [f"{me.name}-doc-stream"])  # the stream's first batch was committed: its own
