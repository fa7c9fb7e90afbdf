"""The gateway's API-key interceptor (gateway/access/auth.py) in a real gRPC server on loopback, with servicers
that only record what reached them: one key, every collection a request touches, every message of a
stream. tests/gateway/access/test_access.py and test_tenant_isolation.py run the same checks on the whole stack."""

from __future__ import annotations

import base64
import json

import grpc
import pytest

from hybridsearch.security.apikeys import AuthError, KeyStore, create_key, parse_entry
from hybridsearch.gateway.access.auth import ApiKeyInterceptor, authorization, refusal
from hybridsearch.gateway.access.caller import Caller
from hybridsearch.config.settings import Settings
from hybridsearch.gateway.query.request import plan_search
from hybridsearch.gateway.query.paging import PageTokens, request_digest
from hybridsearch.v1 import ingest_pb2, ingest_pb2_grpc, search_pb2, search_pb2_grpc


def digest(request: search_pb2.SearchRequest) -> str:
    """The page digest of a request as the gateway makes it: over the collections its plan names."""
    shape = search_pb2.SearchRequest(query=request.query, collection=request.collection, collections=request.collections)
    return request_digest(request, plan_search(shape, Settings()).requested)

DENIED, UNAUTH, INVALID = (grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.UNAUTHENTICATED,
                           grpc.StatusCode.INVALID_ARGUMENT)
TENANT_A = Caller(frozenset(), key=parse_entry({"id": "0000000a", "tenant": "team-a", "sha256": "a" * 64,
                                                "read": ["pa-*"], "write": ["pa-docs"]}, "test"))


def test_one_authorization_header_is_read_and_two_are_refused():
    assert authorization([("user-agent", "x"), ("authorization", "Bearer k")]) == "Bearer k"
    assert authorization([]) is None
    with pytest.raises(AuthError, match="more than one authorization header") as err:
        authorization([("authorization", "Bearer k1"), ("Authorization", "Bearer k2")])
    assert err.value.code == "unauthenticated" and "k1" not in str(err.value)


@pytest.mark.parametrize("operation, request_, answer", [
    ("read", search_pb2.SearchRequest(collection="pa-docs"), None),
    ("read", search_pb2.SearchRequest(collections=["pa-docs", "pa-wiki"]), None),
    ("read", search_pb2.SearchRequest(collection="pa-docs", collections=["pa-docs", "pb-secret"]),
     (DENIED, "may not read collection 'pb-secret'")),
    ("read", search_pb2.SearchRequest(collections=["pb-secret", "pa-docs"]),
     (DENIED, "may not read collection 'pb-secret'")),
    ("read", search_pb2.SearchRequest(query="q"), (DENIED, "may not read collection 'default'")),
    ("read", search_pb2.SearchRequest(collection="pa-docs", collections=["pa-docs", "Bad"]),
     (INVALID, "'Bad' is invalid")),
    ("write", ingest_pb2.UpsertRequest(collection="pa-docs"), None),
    ("write", ingest_pb2.UpsertRequest(collection="pa-wiki"), (DENIED, "may not write collection 'pa-wiki'")),
    ("write", ingest_pb2.DeleteRequest(collection="pb-secret"), (DENIED, "may not write collection 'pb-secret'")),
    ("read", ingest_pb2.StatsRequest(collection="pb-secret"), (DENIED, "may not read collection 'pb-secret'")),
    ("read", search_pb2.SearchHit(collection="pa-docs"),
     (DENIED, "no collection rule for hybridsearch.v1.SearchHit")),
])
def test_refusal_names_the_first_refused_collection(operation, request_, answer):
    got = refusal(TENANT_A, operation, request_)
    if answer is None:
        assert got is None
    else:
        assert got is not None and got[0] == answer[0] and answer[1] in got[1], got


class Recorder(search_pb2_grpc.SearchServiceServicer, ingest_pb2_grpc.IngestServiceServicer):
    """What reached the servicers."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    async def Search(self, request, context):
        self.seen.append(f"search:{request.collection}:{','.join(request.collections)}")
        return search_pb2.SearchResponse()

    async def UpsertStream(self, requests, context):
        async for request in requests:
            self.seen.append(f"upsert:{request.collection}")
        return ingest_pb2.UpsertResponse()


@pytest.fixture
async def gateway(tmp_path):
    keys_file = tmp_path / "keys.yaml"
    a, _ = create_key(keys_file, "team-a", ["pa-*"], ["pa-docs"])
    b, _ = create_key(keys_file, "team-b", ["pb-*"], ["pb-secret"])
    server = grpc.aio.server(interceptors=[ApiKeyInterceptor(KeyStore(keys_file))])
    recorder = Recorder()
    search_pb2_grpc.add_SearchServiceServicer_to_server(recorder, server)
    ingest_pb2_grpc.add_IngestServiceServicer_to_server(recorder, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
    yield {"a": a, "b": b, "recorder": recorder, "search": search_pb2_grpc.SearchServiceStub(channel),
           "ingest": ingest_pb2_grpc.IngestServiceStub(channel)}
    await channel.close()
    await server.stop(0)


def bearer(*keys: str) -> tuple[tuple[str, str], ...]:
    return tuple(("authorization", f"Bearer {key}") for key in keys)


async def refused(call) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await call
    return err.value.code(), err.value.details()


async def test_the_bug_request_is_refused_before_the_servicer(gateway):
    request = search_pb2.SearchRequest(query="q", collection="pa-docs", collections=["pa-docs", "pb-secret"])
    code, details = await refused(gateway["search"].Search(request, metadata=bearer(gateway["a"]), timeout=10))
    assert code == DENIED and "may not read collection 'pb-secret'" in details
    own = search_pb2.SearchRequest(query="q", collections=["pa-docs", "pa-wiki"])
    await gateway["search"].Search(own, metadata=bearer(gateway["a"]), timeout=10)
    assert gateway["recorder"].seen == ["search::pa-docs,pa-wiki"]


async def test_another_tenants_page_token_is_refused(gateway):
    b_token = PageTokens(b"k" * 32, 600).issue("o", 10, digest(
        search_pb2.SearchRequest(query="q", collection="pb-secret")))
    request = search_pb2.SearchRequest(query="q", collection="pa-docs", page_token=b_token)
    code, details = await refused(gateway["search"].Search(request, metadata=bearer(gateway["a"]), timeout=10))
    assert code == DENIED and "may not read collection 'pb-secret'" in details
    assert gateway["recorder"].seen == []


async def test_two_authorization_headers_are_unauthenticated(gateway):
    request = search_pb2.SearchRequest(query="q", collection="pb-secret")
    for keys in ((gateway["a"], gateway["b"]), (gateway["b"], gateway["b"]), (gateway["b"], "not-a-key")):
        code, details = await refused(gateway["search"].Search(request, metadata=bearer(*keys), timeout=10))
        assert code == UNAUTH and "more than one authorization header" in details
    assert gateway["recorder"].seen == []


async def test_every_message_of_a_stream_is_checked(gateway):
    async def batches():
        yield ingest_pb2.UpsertRequest(collection="pb-secret")
        yield ingest_pb2.UpsertRequest(collection="pa-docs")

    stream = gateway["ingest"].UpsertStream(batches(), metadata=bearer(gateway["b"]), timeout=10)
    code, details = await refused(stream)
    assert code == DENIED and "may not write collection 'pa-docs'" in details
    assert gateway["recorder"].seen == ["upsert:pb-secret"]


async def test_an_invalid_name_is_an_invalid_argument(gateway):
    request = search_pb2.SearchRequest(query="q", collections=["pa-docs", "NOT valid"])
    code, details = await refused(gateway["search"].Search(request, metadata=bearer(gateway["a"]), timeout=10))
    assert code == INVALID and "'NOT valid' is invalid" in details


class Principals(search_pb2_grpc.SearchServiceServicer):
    """Records whom each search reached the servicer on behalf of."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, ...]] = []

    async def Search(self, request, context):
        from hybridsearch.gateway.access.auth import CALLER

        self.seen.append(tuple(sorted(CALLER.get().principals)))
        return search_pb2.SearchResponse()


@pytest.fixture
async def identities(tmp_path):
    """A gateway with a keys file (a plain key, a service key that may act for users and eng groups, one with
    principals of its own) and a test identity provider whose tokens may read `pa-*`."""
    import json as json_
    import time

    from joserfc import jwt
    from joserfc.jwk import KeySet, RSAKey

    from hybridsearch.config.access import OidcSettings
    from hybridsearch.security.oidc import OidcVerifier

    keys_file = tmp_path / "keys.yaml"
    plain, _ = create_key(keys_file, "team-a", ["pa-*"], [])
    service, _ = create_key(keys_file, "search-app", ["pa-*"], [], may_act_for=["user:*", "group:eng-*"])
    own, _ = create_key(keys_file, "team-a", ["pa-*"], [], principals=["user:ci", "group:robots"])
    signing = RSAKey.generate_key(2048, parameters={"kid": "idp-1"})
    (tmp_path / "jwks.json").write_text(json_.dumps(KeySet([signing]).as_dict(private=False)))
    oidc = OidcSettings(issuer="https://idp.test", audience="hybridsearch", jwks_file=tmp_path / "jwks.json",
                        read=["pa-*"])

    def token(**claims):
        now = int(time.time())
        body = {"iss": "https://idp.test", "aud": "hybridsearch", "sub": "ana", "exp": now + 300,
                "groups": ["eng-search"], **claims}
        return jwt.encode({"alg": "RS256", "kid": "idp-1"}, body, signing)

    server = grpc.aio.server(interceptors=[ApiKeyInterceptor(KeyStore(keys_file), OidcVerifier(oidc))])
    servicer = Principals()
    search_pb2_grpc.add_SearchServiceServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
    yield {"plain": plain, "service": service, "own": own, "token": token, "servicer": servicer,
           "search": search_pb2_grpc.SearchServiceStub(channel)}
    await channel.close()
    await server.stop(0)


def act_for(key: str, principals: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {key}"), ("x-hybridsearch-act-for", principals))


async def test_a_token_of_the_identity_provider_searches_as_its_user_and_groups(identities, caplog):
    caplog.set_level("INFO", logger="hybridsearch.audit")
    request = search_pb2.SearchRequest(query="q", collection="pa-docs")
    await identities["search"].Search(request, metadata=bearer(identities["token"]()), timeout=10)
    assert identities["servicer"].seen == [("group:eng-search", "user:ana")]
    line = json.loads(caplog.records[-1].getMessage())
    assert line["outcome"] == "admitted" and line["subject"] == "ana" and line["key"] is None
    code, details = await refused(identities["search"].Search(search_pb2.SearchRequest(query="q", collection="pb-x"),
                                                              metadata=bearer(identities["token"]()), timeout=10))
    assert code == DENIED and "token of 'ana' may not read collection 'pb-x'" in details


@pytest.mark.parametrize("claims, why", [
    ({"exp": 1}, "token expired"),
    ({"aud": "another-service"}, "claim not accepted"),
    ({"iss": "https://other.test"}, "claim not accepted"),
])
async def test_a_bad_token_is_unauthenticated_saying_why(identities, claims, why):
    request = search_pb2.SearchRequest(query="q", collection="pa-docs")
    code, details = await refused(identities["search"].Search(request, metadata=bearer(identities["token"](**claims)),
                                                              timeout=10))
    assert code == UNAUTH and why in details
    assert identities["servicer"].seen == []


async def test_a_token_with_no_signature_or_another_signature_is_unauthenticated(identities):
    good = identities["token"]()
    header, body, signature = good.split(".")
    forged = f"{header}.{body[:-4]}AAAA.{signature}"  # the claims changed under the provider's signature
    none = ".".join([base64.urlsafe_b64encode(b'{"alg":"none"}').rstrip(b"=").decode(), body, ""])
    for token, why in ((forged, "signature does not check"), (none, "algorithm not accepted")):
        code, details = await refused(identities["search"].Search(search_pb2.SearchRequest(query="q", collection="pa-docs"),
                                                                  metadata=bearer(token), timeout=10))
        assert code == UNAUTH and why in details
    assert identities["servicer"].seen == []


async def test_a_key_acts_for_the_users_it_may_and_no_others(identities, caplog):
    caplog.set_level("INFO", logger="hybridsearch.audit")
    request = search_pb2.SearchRequest(query="q", collection="pa-docs")
    await identities["search"].Search(request, metadata=act_for(identities["service"], "user:bob,group:eng-ml"), timeout=10)
    assert identities["servicer"].seen == [("group:eng-ml", "user:bob")]
    line = json.loads(caplog.records[-1].getMessage())
    assert line["acting_for"] and line["key"] and line["tenant"] == "search-app" and line["principals"] == [
        "group:eng-ml", "user:bob"]  # the audit line names both: the key and whom it acts for
    for key, names, code, why in (
            (identities["service"], "user:bob,group:hr", DENIED, "may not act for group:hr"),
            (identities["plain"], "user:bob", DENIED, "it acts for nobody"),
            (identities["service"], "group:eng-ml", INVALID, "names no user"),
            (identities["service"], "bob", INVALID, "is not one")):
        got_code, details = await refused(identities["search"].Search(request, metadata=act_for(key, names), timeout=10))
        assert got_code == code and why in details, details
    code, details = await refused(identities["search"].Search(
        request, metadata=(("authorization", f"Bearer {identities['token']()}"), ("x-hybridsearch-act-for", "user:x")),
        timeout=10))
    assert code == UNAUTH and "for API keys" in details
    assert len(identities["servicer"].seen) == 1


async def test_a_key_alone_searches_as_its_own_principals(identities):
    request = search_pb2.SearchRequest(query="q", collection="pa-docs")
    await identities["search"].Search(request, metadata=bearer(identities["own"]), timeout=10)
    await identities["search"].Search(request, metadata=bearer(identities["plain"]), timeout=10)
    assert identities["servicer"].seen == [("group:robots", "user:ci"), ()]
