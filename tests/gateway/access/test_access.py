"""Access control and transport security on a real stack: API keys per tenant at a TLS gateway, mutual TLS
between services, `serve all`'s local admin key and certificates, and no secret in any log."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import time
from contextlib import closing

import grpc
import pytest
from joserfc import jwt
from joserfc.jwk import KeySet, RSAKey
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import ProtoReflectionDescriptorDatabase
from stacks import running_stack, stack_env_on

from hybridsearch.client import GatewayClient
from hybridsearch.runtime import services
from hybridsearch.security.apikeys import create_key
from hybridsearch.security.tls import TlsFiles
from hybridsearch.v1 import ingest_pb2, search_pb2

pytestmark = [pytest.mark.stack, pytest.mark.timeout(300)]
DENIED, UNAUTH = grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.UNAUTHENTICATED


# A test identity provider: its signing key made here, its JWKS a file the gateway reads (auth.oidc).
IDP_KEY = RSAKey.generate_key(2048, parameters={"kid": "test-idp-1"})
IDP, AUDIENCE = "https://idp.hybridsearch.test", "hybridsearch-gateway"


def idp_token(**claims) -> str:
    now = int(time.time())
    body = {"iss": IDP, "aud": AUDIENCE, "sub": "ana", "exp": now + 300, "groups": ["team-a-readers"], **claims}
    return jwt.encode({"alg": "RS256", "kid": IDP_KEY.kid}, body, IDP_KEY)


@pytest.fixture(scope="module")
def secure_stack(tmp_path_factory):
    """`serve all` as a user runs it with TLS on: the launcher makes the admin key and the certificates. It also takes
    bearer tokens of the test identity provider, whose holders may read team-a's collections."""
    data = tmp_path_factory.mktemp("secure")
    (data / "jwks.json").write_text(json.dumps(KeySet([IDP_KEY]).as_dict(private=False)))
    env = {**stack_env_on("2905", "2697", "2860"), "HYBRIDSEARCH_DATA_DIR": str(data),
           "HYBRIDSEARCH_TLS__ENABLED": "true", "HYBRIDSEARCH_AUTH__OIDC__ISSUER": IDP,
           "HYBRIDSEARCH_AUTH__OIDC__AUDIENCE": AUDIENCE, "HYBRIDSEARCH_AUTH__OIDC__JWKS_FILE": str(data / "jwks.json"),
           "HYBRIDSEARCH_AUTH__OIDC__READ": '["team-a-*"]'}
    with running_stack(env) as running:
        yield running


@pytest.fixture(scope="module")
def tenants(secure_stack):
    """Keys of two tenants added to the running stack's keys file (the gateway rereads it), and their data."""
    keys_file = secure_stack.settings.data_dir / "auth" / "keys.yaml"
    a, _ = create_key(keys_file, "team-a", ["team-a-*"], ["team-a-docs"])
    b, _ = create_key(keys_file, "team-b", ["team-b-*"], ["team-b-docs"])
    clients = {name: GatewayClient(secure_stack.settings.endpoints.addr("gateway"), api_key=key)
               for name, key in (("a", a), ("b", b))}
    for name, client in clients.items():
        docs = [ingest_pb2.Document(id=f"{name}-{i}", title=f"zebra notes {name} {i}",
                                    text=f"zebra migration notes of team {name}, document {i}") for i in range(3)]
        assert client.index(f"team-{name}-docs", docs).documents_received == 3
    yield {"keys": {"a": a, "b": b}, **clients}
    for client in clients.values():
        client.close()


def gateway(stack, key: str | None = None) -> GatewayClient:
    return GatewayClient(stack.settings.endpoints.addr("gateway"), api_key=key)


def code_of(call) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.RpcError) as failed:
        call()
    return failed.value.code(), failed.value.details()


def search(client: GatewayClient, collection: str, query: str = "zebra migration"):
    return client.search(search_pb2.SearchRequest(query=query, collection=collection, top_k=10), timeout=30)


def test_the_launcher_made_the_admin_key_and_certificates(secure_stack):
    notes = "\n".join(secure_stack.notes)
    admin = secure_stack.settings.data_dir / "auth" / "admin.key"
    assert f"admin key in {admin.resolve()}" in notes and "tls: gateway TLS, mutual TLS inside" in notes
    assert oct(admin.stat().st_mode & 0o777) == "0o600"
    assert all(p.exists() for p in vars(TlsFiles.of(secure_stack.settings)).values())


@pytest.fixture(scope="module")
def tls_channel(secure_stack):
    """A TLS channel to the gateway that sends no key unless a call passes one."""
    from hybridsearch.security.tls import sync_channel

    with sync_channel(secure_stack.settings.endpoints.addr("gateway"), secure_stack.settings, internal=False) as channel:
        yield channel


@pytest.mark.parametrize("metadata,message", [
    ((), "missing API key"),
    ((("authorization", "Bearer hs_0123abcd_" + "A" * 43),), "invalid API key"),
    ((("authorization", "Bearer not-a-key"),), "malformed API key"),
    ((("authorization", "Basic dXNlcjpwYXNz"),), "expected 'Bearer <key>'"),
])
def test_no_wrong_or_garbled_key_is_unauthenticated(tls_channel, tenants, metadata, message):
    from hybridsearch.v1 import ingest_pb2_grpc, search_pb2_grpc

    calls = [
        lambda: search_pb2_grpc.SearchServiceStub(tls_channel).Search(
            search_pb2.SearchRequest(query="zebra", collection="team-a-docs"), metadata=metadata, timeout=10),
        lambda: ingest_pb2_grpc.IngestServiceStub(tls_channel).Stats(
            ingest_pb2.StatsRequest(collection="team-a-docs"), metadata=metadata, timeout=10),
        lambda: ingest_pb2_grpc.IngestServiceStub(tls_channel).UpsertStream(
            iter([ingest_pb2.UpsertRequest(collection="team-a-docs")]), metadata=metadata, timeout=10),
    ]
    for call in calls:
        code, details = code_of(call)
        assert code == UNAUTH and message in details


def test_a_tenant_is_denied_another_tenants_collection(secure_stack, tenants):
    b = tenants["b"]
    doc = ingest_pb2.Document(id="intruder", text="written by team b")
    calls = {
        "read": [lambda c: search(b, c), lambda c: b.stats(c)],
        "write": [lambda c: b.index(c, [doc]), lambda c: b.delete(c, ["a-0"])],
    }
    for operation, ops in calls.items():
        for call in ops:
            existing = code_of(lambda: call("team-a-docs"))
            missing = code_of(lambda: call("team-a-nothing"))
            assert existing[0] == missing[0] == DENIED
            assert f"may not {operation} collection 'team-a-docs'" in existing[1]
            # The same answer, name aside, whether the collection exists or not.
            assert existing[1].replace("team-a-docs", "X") == missing[1].replace("team-a-nothing", "X")
            assert "team-a" not in existing[1].replace("'team-a-docs'", "")
    # Team a's documents are untouched, and its own key still reads them.
    assert {hit.doc_id for hit in search(tenants["a"], "team-a-docs").hits} == {"a-0", "a-1", "a-2"}


def test_a_stream_is_checked_message_by_message(secure_stack, tenants):
    def batches():
        yield ingest_pb2.UpsertRequest(collection="team-b-docs", documents=[ingest_pb2.Document(id="b-9", text="zebra")])
        yield ingest_pb2.UpsertRequest(collection="team-a-docs", documents=[ingest_pb2.Document(id="b-10", text="zebra")])

    code, details = code_of(lambda: tenants["b"].ingest_stub.UpsertStream(batches(), timeout=60))
    assert code == DENIED and "may not write collection 'team-a-docs'" in details
    assert "b-10" not in {hit.doc_id for hit in search(tenants["a"], "team-a-docs").hits}


def test_read_only_rights_and_a_tenant_sees_only_its_own_hits(secure_stack, tenants):
    a = tenants["a"]
    # team-a-* grants reading any team-a collection, writing only team-a-docs.
    code, details = code_of(lambda: a.index("team-a-wiki", [ingest_pb2.Document(id="w", text="zebra")]))
    assert code == DENIED and "may not write collection 'team-a-wiki'" in details
    for name, client in (("a", a), ("b", tenants["b"])):
        hits = search(client, f"team-{name}-docs").hits
        assert hits and all(hit.doc_id.startswith(f"{name}-") for hit in hits)
        assert client.stats(f"team-{name}-docs").collection == f"team-{name}-docs"


async def test_asyncio_channels_of_the_load_generator_carry_the_key(secure_stack, tenants):
    """aio_gateway_channel (ChannelPool, the fault drill): TLS and the key on every call without metadata."""
    from hybridsearch.security.access import aio_gateway_channel
    from hybridsearch.v1 import search_pb2_grpc

    address = secure_stack.settings.endpoints.addr("gateway")
    request = search_pb2.SearchRequest(query="zebra migration", collection="team-b-docs", top_k=5)
    async with aio_gateway_channel(address, key=tenants["keys"]["b"]) as channel:
        reply = await search_pb2_grpc.SearchServiceStub(channel).Search(request, timeout=30)
        assert reply.hits and all(hit.doc_id.startswith("b-") for hit in reply.hits)
        with pytest.raises(grpc.aio.AioRpcError) as denied:
            await search_pb2_grpc.SearchServiceStub(channel).Search(
                search_pb2.SearchRequest(query="zebra", collection="team-a-docs"), timeout=30)
        assert denied.value.code() == DENIED


def test_health_and_reflection_need_no_key(tls_channel):
    reply = health_pb2_grpc.HealthStub(tls_channel).Check(health_pb2.HealthCheckRequest(), timeout=10)
    assert reply.status == health_pb2.HealthCheckResponse.SERVING
    names = ProtoReflectionDescriptorDatabase(tls_channel).get_services()
    assert {"hybridsearch.v1.SearchService", "grpc.health.v1.Health"} <= set(names)


def health(channel) -> health_pb2.HealthCheckResponse:
    return health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5)


def test_a_plaintext_client_is_refused_by_the_tls_gateway(secure_stack):
    with grpc.insecure_channel(secure_stack.settings.endpoints.addr("gateway")) as channel:
        code, _ = code_of(lambda: health(channel))
    assert code == grpc.StatusCode.UNAVAILABLE


@pytest.mark.parametrize("service", services.INTERNAL)
def test_internal_services_require_a_client_certificate(secure_stack, service):
    files = TlsFiles.of(secure_stack.settings)
    address = secure_stack.settings.endpoints.addr(service)
    for creds in (None, grpc.ssl_channel_credentials(files.ca.read_bytes())):  # plaintext, then TLS without a certificate
        with (grpc.insecure_channel(address) if creds is None else grpc.secure_channel(address, creds)) as channel:
            code, _ = code_of(lambda: health(channel))
        assert code == grpc.StatusCode.UNAVAILABLE
    # A certificate the services' CA did not sign is refused too.
    stranger = secure_stack.settings.data_dir / "stranger"
    from hybridsearch.security.tls import make_certificates

    make_certificates(stranger)
    creds = grpc.ssl_channel_credentials(files.ca.read_bytes(), (stranger / "client.key").read_bytes(),
                                         (stranger / "client.crt").read_bytes())
    with grpc.secure_channel(address, creds) as channel:
        assert code_of(lambda: health(channel))[0] == grpc.StatusCode.UNAVAILABLE
    creds = grpc.ssl_channel_credentials(files.ca.read_bytes(), files.client_key.read_bytes(), files.client_cert.read_bytes())
    with grpc.secure_channel(address, creds) as channel:
        assert health(channel).status == health_pb2.HealthCheckResponse.SERVING


def cli(*args: str, **env: str) -> subprocess.CompletedProcess:
    """The `hybridsearch` command with this stack's environment (running_stack set it), as a user's shell has it."""
    return subprocess.run([sys.executable, "-m", "hybridsearch.cli", *args], capture_output=True, text=True,
                          timeout=120, env={**os.environ, **env})


def test_the_cli_finds_the_admin_key_and_the_ca_without_flags(secure_stack, tenants):
    docs = [ingest_pb2.Document(id="okapi.md", title="Okapi", text="okapi bm25 weighs term frequency and length")]
    with closing(gateway(secure_stack)) as admin:  # no key given: the local admin key, as the CLI finds it
        admin.index("default", docs)
        admin.index("team-c-docs", docs)
    found = cli("query", "okapi term frequency", "--json", "-n", "3")
    assert found.returncode == 0, found.stderr
    assert '"doc_id": "okapi.md"' in found.stdout
    forbidden = cli("query", "okapi", HYBRIDSEARCH_API_KEY=tenants["keys"]["a"])
    assert forbidden.returncode == 2 and "PERMISSION_DENIED" in forbidden.stderr and "'default'" in forbidden.stderr
    made = cli("keys", "create", "--tenant", "team-c", "--read", "team-c-*")
    assert made.returncode == 0 and made.stdout.strip().startswith("hs_")
    assert made.stdout.strip() not in (secure_stack.settings.data_dir / "auth" / "keys.yaml").read_text()
    allowed = cli("query", "okapi", "-c", "team-c-docs", "--json", HYBRIDSEARCH_API_KEY=made.stdout.strip())
    assert allowed.returncode == 0, allowed.stderr
    assert '"doc_id": "okapi.md"' in allowed.stdout
    elsewhere = cli("query", "okapi", "-c", "team-c-nothing", HYBRIDSEARCH_API_KEY=made.stdout.strip())
    assert elsewhere.returncode == 2 and "NOT_FOUND" in elsewhere.stderr  # allowed, and told it does not exist


def secrets_of(stack, tenants) -> list[str]:
    """Every API key, key secret and private key body this stack knows."""
    data = stack.settings.data_dir
    keys = [*tenants["keys"].values(), (data / "auth" / "admin.key").read_text().strip()]
    found = [*keys, *(key.split("_", 2)[2] for key in keys)]  # the secret may hold "_" itself
    for pem in (data / "tls").glob("*.key"):
        body = "".join(line for line in pem.read_text().splitlines() if "-----" not in line)
        found += [body, body[:40], base64.b64decode(body).hex()[:40]]
    return found


def test_no_key_token_or_private_key_in_any_log(secure_stack, tenants):
    # The calls above and one of each kind more, so every path has logged what it logs.
    with closing(gateway(secure_stack, tenants["keys"]["b"])) as b:
        search(b, "team-b-docs")
        code_of(lambda: search(b, "team-a-docs"))
    with closing(gateway(secure_stack, "hs_0123abcd_" + "A" * 43)) as wrong:
        code_of(lambda: search(wrong, "team-b-docs"))
    logs = sorted((secure_stack.settings.data_dir / "logs").rglob("*"))
    text = "\n".join(p.read_text(errors="replace") for p in logs if p.is_file())
    assert len(logs) >= 5 and "API keys: on" in text  # the gateway's own log is among them
    for secret in secrets_of(secure_stack, tenants):
        assert secret not in text
    assert "PRIVATE KEY" not in text and "Bearer hs_" not in text and "hs_0123abcd_" not in text


def test_a_token_of_the_identity_provider_searches_end_to_end(secure_stack, tenants):
    """A bearer JWT through the real TLS gateway: its user reads what auth.oidc.read names, nothing else; expired,
    wrong-audience, wrongly signed and unsigned tokens are UNAUTHENTICATED; the gateway's audit log names the user."""
    with gateway(secure_stack, idp_token()) as ana:
        assert {h.doc_id for h in search(ana, "team-a-docs").hits} == {"a-0", "a-1", "a-2"}
        code, details = code_of(lambda: search(ana, "team-b-docs"))
        assert code == DENIED and "token of 'ana' may not read collection 'team-b-docs'" in details
    impostor = RSAKey.generate_key(2048, parameters={"kid": IDP_KEY.kid})
    unsigned = ".".join([base64.urlsafe_b64encode(b'{"alg":"none"}').rstrip(b"=").decode(),
                         idp_token().split(".")[1], ""])
    for token, why in ((idp_token(exp=int(time.time()) - 3600), "token expired"),
                       (idp_token(aud="another-service"), "claim not accepted"),
                       (jwt.encode({"alg": "RS256", "kid": IDP_KEY.kid}, {"iss": IDP, "aud": AUDIENCE, "sub": "ana",
                                                                         "exp": int(time.time()) + 300}, impostor),
                        "signature does not check"),
                       (unsigned, "algorithm not accepted")):
        with gateway(secure_stack, token) as caller:
            code, details = code_of(lambda: search(caller, "team-a-docs"))
        assert code == UNAUTH and why in details, details
    logs = "".join(p.read_text(errors="replace") for p in (secure_stack.settings.data_dir / "logs").rglob("*")
                   if p.is_file())
    assert '"outcome":"admitted"' in logs and '"subject":"ana"' in logs and idp_token().split(".")[2] not in logs
