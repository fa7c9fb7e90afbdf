"""Document readers through the real gateway (issue 36), tested as an attacker would: one collection whose documents
carry different readers, two readers with an overlapping group, and every read path either could use to learn of a
document it may not read: searches in every mode and effort, typo tolerance, expansion and its cache, link
expansion, tags, explain, context, page tokens, Stats, GetDocuments, ListCollections.

    ana: user:ana, group:eng, group:staff    (her own API key)
    bob: user:bob, group:eng, group:hr       (a service key acting for him: x-hybridsearch-act-for)

    eng-*  allow group:eng                   both
    hr-*   allow group:hr                    bob
    sec-*  allow group:eng, deny user:bob    ana
    pub-*  allow *                           both
    def-*  no acl: the collection's default, allow group:staff: ana

Each forbidden document holds words nobody else's hold (its markers); every byte of every answer is scanned for the
forbidden ids and words, in both directions, and every cache is warmed by one reader before the other asks."""

from __future__ import annotations

import json
from contextlib import closing

import grpc
import pytest
from stacks import running_stack, stack_env_on, STACK_ENV

from hybridsearch.client import GatewayClient, document
from hybridsearch.security.apikeys import create_key
from hybridsearch.v1 import search_pb2

pytestmark = [pytest.mark.stack, pytest.mark.timeout(600)]
COLLECTION = "perm-docs"
SHARED = "lighthouse ledger"  # every document holds it: one query reaches them all
# group -> (acl, its private words: in no other group's documents)
GROUPS = {
    "eng": (["group:eng"], ("gearbox", "flywheel")),
    "hr": (["group:hr"], ("payroll", "grievance")),
    "sec": (["group:eng", "!user:bob"], ("obsidian", "cipherkey")),
    "pub": (["*"], ("meadow", "sunflower")),
    "def": (None, ("quarry", "granite")),
}
READS = {"ana": {"eng", "sec", "pub", "def"}, "bob": {"eng", "hr", "pub"}}
PER_GROUP = 4


class Reader:
    def __init__(self, name: str, client: GatewayClient) -> None:
        self.name, self.client = name, client

    @property
    def forbidden(self) -> set[str]:
        return set(GROUPS) - READS[self.name]

    @property
    def readable_ids(self) -> set[str]:
        return {f"{g}-{i}" for g in READS[self.name] for i in range(PER_GROUP)}

    def markers(self) -> list[str]:
        """What no answer to this reader may hold: the forbidden documents' ids and words."""
        return [m for g in self.forbidden for m in (f"{g}-", *GROUPS[g][1])]

    def leaked(self, message, asked: str = "") -> list[str]:
        """The markers in a response's bytes; the caller's own query (`asked`), echoed back, taken out first."""
        data = message.SerializeToString()
        for text in filter(None, (asked, *asked.split())):
            data = data.replace(text.encode(), b"")
        return [m for m in self.markers() if m.encode() in data]

    def search(self, query: str = SHARED, **fields) -> search_pb2.SearchResponse:
        fields.setdefault("collection", COLLECTION)
        return self.client.search(search_pb2.SearchRequest(query=query, **fields), timeout=60)


def documents() -> list:
    out = []
    for group, (acl, words) in GROUPS.items():
        for i in range(PER_GROUP):
            others = f"{group}-{(i + 1) % PER_GROUP}"
            out.append(document(
                f"{group}-{i}", f"The {SHARED} of {group}: {words[0]} {words[1]} entry {i}. The {words[i % 2]} "
                f"{SHARED} records {words[0]} details and [[{group} page {(i + 1) % PER_GROUP}]].",
                title=f"{group} page {i}", acl=acl, tags=f"{words[0]},harbor", links=f"{others},pub-0,hr-0,sec-0"))
    return out


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    collections = {**json.loads(STACK_ENV["HYBRIDSEARCH_COLLECTIONS"]),
                   COLLECTION: {"acl": {"allow": ["group:staff"]}, "tag_leg": True}}
    env = {**stack_env_on("2485", "2607", "2875"), "HYBRIDSEARCH_COLLECTIONS": json.dumps(collections),
           "HYBRIDSEARCH_DATA_DIR": str(tmp_path_factory.mktemp("readers"))}
    with running_stack(env) as running:
        yield running


@pytest.fixture(scope="module")
def readers(stack):
    keys_file = stack.settings.data_dir / "auth" / "keys.yaml"
    address = stack.settings.endpoints.addr("gateway")
    writer, _ = create_key(keys_file, "perm", ["perm-*"], ["perm-*"])
    ana_key, _ = create_key(keys_file, "perm", ["perm-*"], [],
                            principals=["user:ana", "group:eng", "group:staff"])
    service, _ = create_key(keys_file, "perm", ["perm-*"], [], may_act_for=["user:*", "group:*"])
    with closing(GatewayClient(address, api_key=writer)) as w:
        assert w.upsert(COLLECTION, documents()).documents_received == len(GROUPS) * PER_GROUP
    made = {"ana": Reader("ana", GatewayClient(address, api_key=ana_key)),
            "bob": Reader("bob", GatewayClient(address, api_key=service,
                                               act_for=["user:bob", "group:eng", "group:hr"]))}
    made["writer_key"] = writer
    yield made
    for reader in ("ana", "bob"):
        made[reader].client.close()


def both(readers) -> list[tuple[Reader, Reader]]:
    return [(readers["ana"], readers["bob"]), (readers["bob"], readers["ana"])]


MODES = [dict(mode=m, effort=e) for m in (1, 2, 3) for e in (1, 2)] + [dict(effort=3, expand=True)]


@pytest.mark.parametrize("fields", MODES, ids=lambda f: "-".join(f"{k}{v}" for k, v in f.items()))
def test_every_mode_returns_a_full_page_of_readable_documents_only(readers, fields):
    for me, _ in both(readers):
        reply = me.search(top_k=10, explain=True, **fields)
        assert len(reply.hits) == 10 and {h.doc_id for h in reply.hits} <= me.readable_ids, fields
        assert not me.leaked(reply), (fields, me.leaked(reply))


def test_a_forbidden_documents_own_words_find_nothing_of_it(readers):
    for me, _ in both(readers):
        for group in me.forbidden:
            for word in GROUPS[group][1]:
                for fields in (dict(effort=1), dict(effort=2, expand=True), dict(effort=1, fuzzy=True)):
                    reply = me.search(word, explain=True, top_k=10, **fields)
                    assert not me.leaked(reply, word), (word, fields, me.leaked(reply, word))


def test_typo_correction_never_suggests_a_forbidden_word(readers):
    for me, other in both(readers):
        group = next(iter(me.forbidden))
        word = GROUPS[group][1][0]
        typo = word[:2] + word[3] + word[2] + word[4:]  # a transposition: one edit away
        theirs = other.search(typo, fuzzy=True, effort=1, top_k=5)  # warms whatever the other's search keeps
        assert theirs.hits and theirs.hits[0].doc_id.startswith(group)
        for effort in (1, 2, 3):
            reply = me.search(f"{typo} {SHARED}", fuzzy=True, effort=effort, expand=effort > 1, explain=True)
            assert not me.leaked(reply), (effort, me.leaked(reply))


def test_the_expansion_cache_is_per_reader(readers):
    """The same query, expanded first for one reader (variants from its documents), then for the other: a miss,
    then its own entry; no forbidden word in its variants."""
    for me, other in both(readers):
        group = next(iter(other.readable_ids - me.readable_ids)).split("-")[0]
        query = f"{SHARED} {GROUPS[group][1][0]} records"
        theirs = other.search(query, effort=2, expand=True, explain=True)
        assert not theirs.explain.expansion_cache_hit
        for attempt in range(2):
            mine = me.search(query, effort=2, expand=True, explain=True)
            assert not me.leaked(mine, query), me.leaked(mine, query)
            assert mine.explain.expansion_cache_hit == bool(attempt)


def test_page_tokens_are_bound_to_their_reader(readers):
    for me, other in both(readers):
        first = other.search(top_k=3, effort=1)
        assert first.next_page_token
        with pytest.raises(grpc.RpcError) as refused:
            me.search(top_k=3, effort=1, page_token=first.next_page_token)
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "another query" in refused.value.details()
        page, seen = me.search(top_k=3, effort=1), []
        while True:  # every page of one's own, to the last: readable only, no document twice
            seen += [h.doc_id for h in page.hits]
            assert not me.leaked(page)
            if not page.next_page_token:
                break
            page = me.search(top_k=3, effort=1, page_token=page.next_page_token)
        assert len(seen) == len(set(seen)) and set(seen) == me.readable_ids


def test_links_tags_context_and_explain_hold_only_the_readable(readers):
    for me, _ in both(readers):
        reply = me.search(top_k=20, explain=True, graph=True, context=1, effort=2, expand=True)
        assert reply.hits and not me.leaked(reply), me.leaked(reply)
        words = {w for g in READS[me.name] for w in GROUPS[g][1][:1]}
        assert set(reply.tag_counts) <= words | {"harbor"} and reply.tag_counts["harbor"] > 0
        tags = me.search("harbor " + " ".join(GROUPS[g][1][0] for g in GROUPS), top_k=20, mode=1, effort=1)
        assert not me.leaked(tags) and {h.doc_id for h in tags.hits} <= me.readable_ids


def test_stats_count_only_readable_documents(readers):
    for me, _ in both(readers):
        stats = me.client.stats(COLLECTION)
        assert {s.store: s.documents for s in stats.stores} == {"bm25": len(me.readable_ids),
                                                               "vector": len(me.readable_ids)}
        assert not any(k in s.details for s in stats.stores for k in ("segments", "indexed_vectors"))


def test_a_forbidden_document_is_missing_as_an_absent_one_is(readers):
    for me, _ in both(readers):
        asked = [f"{g}-0" for g in GROUPS] + ["never-written"]
        got = me.client.get_documents(COLLECTION, asked)
        assert {d.id for d in got.documents} == {f"{g}-0" for g in READS[me.name]}
        assert set(got.missing) == {f"{g}-0" for g in me.forbidden} | {"never-written"}
        for fetched in got.documents:  # their own links name forbidden ids: the writer's words, readable as written
            del fetched.metadata["links"]
        assert not me.leaked(got, " ".join(asked))


def test_a_key_may_act_only_for_whom_it_may(stack, readers):
    keys_file = stack.settings.data_dir / "auth" / "keys.yaml"
    narrow, _ = create_key(keys_file, "perm", ["perm-*"], [], may_act_for=["user:*"])
    with closing(GatewayClient(stack.settings.endpoints.addr("gateway"), api_key=narrow,
                               act_for=["user:bob", "group:hr"])) as client:
        with pytest.raises(grpc.RpcError) as refused:
            client.search(search_pb2.SearchRequest(query=SHARED, collection=COLLECTION), timeout=30)
    assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED and "group:hr" in refused.value.details()


def test_a_key_without_principals_reads_only_documents_for_everyone(stack, readers):
    with closing(GatewayClient(stack.settings.endpoints.addr("gateway"), api_key=readers["writer_key"])) as client:
        reply = client.search(search_pb2.SearchRequest(query=SHARED, collection=COLLECTION, top_k=20), timeout=60)
    assert {h.doc_id for h in reply.hits} == {f"pub-{i}" for i in range(PER_GROUP)}


def test_new_readers_apply_without_new_text(stack, readers):
    """The same document sent again with other readers: both stores rewrite its readers (no embedding: the vector
    store's payloads), and the next search of each reader sees the change."""
    ana, bob = readers["ana"], readers["bob"]
    with closing(GatewayClient(stack.settings.endpoints.addr("gateway"), api_key=readers["writer_key"])) as writer:
        moved = [d for d in documents() if d.id == "hr-3"][0]
        moved.acl.Clear()
        moved.acl.allow.extend(["user:ana"])
        written = writer.upsert(COLLECTION, [moved])
        assert written.documents_written == 1
        assert "hr-3" in {h.doc_id for h in ana.search("payroll grievance", top_k=10).hits}
        assert "hr-3" not in {h.doc_id for h in bob.search("payroll grievance", top_k=10).hits}
        restored = [d for d in documents() if d.id == "hr-3"][0]
        assert writer.upsert(COLLECTION, [restored]).documents_written == 1
    assert "hr-3" not in {h.doc_id for h in ana.search("payroll grievance", top_k=10).hits}


def test_list_collections_counts_only_readable_documents(readers):
    for me, _ in both(readers):
        (info,) = [c for c in me.client.list_collections().collections if c.name == COLLECTION]
        assert info.documents == len(me.readable_ids)
        assert {s.store: s.documents for s in info.stores} == {"bm25": len(me.readable_ids),
                                                              "vector": len(me.readable_ids)}


def test_an_admin_key_reads_every_document(stack, readers):
    address = stack.settings.endpoints.addr("gateway")
    everything = {f"{g}-{i}" for g in GROUPS for i in range(PER_GROUP)}
    with closing(GatewayClient(address)) as admin:  # the stack's admin key (serve all made it)
        reply = admin.search(search_pb2.SearchRequest(query=SHARED, collection=COLLECTION, top_k=50, effort=1),
                             timeout=60)
        assert {h.doc_id for h in reply.hits} == everything
        (info,) = [c for c in admin.list_collections().collections if c.name == COLLECTION]
        assert info.documents == len(everything)
