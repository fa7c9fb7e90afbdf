"""Bearer JWTs of an identity provider (security/oidc.py): a provider made in the test (its keys generated here, its
JWKS a file), tokens it signs, and every token the verifier must turn away with a message that says why."""

from __future__ import annotations

import base64
import json
import time

import pytest
from joserfc import jwt
from joserfc.jwk import ECKey, KeySet, OctKey, RSAKey

from hybridsearch.config.access import OidcSettings
from hybridsearch.security.oidc import OidcVerifier, TokenError, looks_like_jwt

ISSUER, AUDIENCE = "https://idp.example.test", "hybridsearch"


class Provider:
    """A test identity provider: signing keys, its JWKS file, tokens."""

    def __init__(self, folder, *keys) -> None:
        self.keys = list(keys) or [RSAKey.generate_key(2048, parameters={"kid": "rsa-1"})]
        self.jwks = folder / "jwks.json"
        self.publish()

    def publish(self) -> None:
        self.jwks.write_text(json.dumps(KeySet(self.keys).as_dict(private=False)))

    def token(self, key=None, alg: str = "RS256", **claims) -> str:
        key = key or self.keys[0]
        now = int(time.time())
        body = {"iss": ISSUER, "aud": AUDIENCE, "sub": "ana", "iat": now, "exp": now + 300,
                "groups": ["eng", "platform"], **claims}
        return jwt.encode({"alg": alg, "kid": key.kid}, {k: v for k, v in body.items() if v is not None}, key)

    def settings(self, **kw) -> OidcSettings:
        return OidcSettings(issuer=ISSUER, audience=AUDIENCE, jwks_file=self.jwks, **kw)


def b64(value: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()


@pytest.fixture
def provider(tmp_path):
    return Provider(tmp_path)


async def test_a_token_of_the_provider_is_its_user_and_groups(provider):
    identity = await OidcVerifier(provider.settings()).verify(provider.token())
    assert identity.subject == "ana" and identity.principals == {"user:ana", "group:eng", "group:platform"}


async def test_ec_keys_and_a_groups_claim_of_another_name(tmp_path):
    ec = ECKey.generate_key("P-256", parameters={"kid": "ec-1"})
    idp = Provider(tmp_path, ec)
    verifier = OidcVerifier(idp.settings(groups_claim="roles", user_claim="email"))
    identity = await verifier.verify(idp.token(alg="ES256", email="ana@example.test", roles="eng, hr"))
    assert identity.principals == {"user:ana@example.test", "group:eng", "group:hr"}


@pytest.mark.parametrize("claims, why", [
    ({"exp": int(time.time()) - 3600}, "token expired"),
    ({"aud": "another-service"}, "claim not accepted"),
    ({"iss": "https://evil.example.test"}, "claim not accepted"),
    ({"nbf": int(time.time()) + 3600}, "claim not accepted"),
    ({"exp": None}, "lacks a required claim"),
    ({"sub": None}, "is no user name"),
    ({"sub": "ana smith"}, "is no user name"),
])
async def test_a_token_with_bad_claims_is_refused_saying_why(provider, claims, why):
    with pytest.raises(TokenError, match=why):
        await OidcVerifier(provider.settings()).verify(provider.token(**claims))


async def test_the_leeway_takes_clock_skew_and_no_more(provider):
    verifier = OidcVerifier(provider.settings(leeway_s=60))
    await verifier.verify(provider.token(exp=int(time.time()) - 30))
    with pytest.raises(TokenError, match="expired"):
        await verifier.verify(provider.token(exp=int(time.time()) - 90))


async def test_a_signature_by_another_key_under_the_providers_key_id_is_refused(provider):
    impostor = RSAKey.generate_key(2048, parameters={"kid": "rsa-1"})  # the provider's kid, not its key
    with pytest.raises(TokenError, match="signature does not check"):
        await OidcVerifier(provider.settings()).verify(provider.token(key=impostor))


async def test_alg_none_and_hmac_are_refused(provider):
    verifier = OidcVerifier(provider.settings())
    unsigned = f"{b64({'alg': 'none', 'typ': 'JWT'})}.{b64({'iss': ISSUER, 'aud': AUDIENCE, 'sub': 'ana', 'exp': int(time.time()) + 300})}."
    with pytest.raises(TokenError, match="algorithm not accepted"):
        await verifier.verify(unsigned)
    secret = OctKey.import_key("a shared secret the gateway must never accept as a signature!!")
    hmac_token = jwt.encode({"alg": "HS256", "kid": "rsa-1"}, {"iss": ISSUER, "aud": AUDIENCE, "sub": "ana",
                                                             "exp": int(time.time()) + 300}, secret)
    with pytest.raises(TokenError, match="algorithm not accepted"):
        await verifier.verify(hmac_token)


async def test_a_rotated_key_is_read_from_the_providers_new_jwks(provider):
    verifier = OidcVerifier(provider.settings())
    await verifier.verify(provider.token())
    rotated = RSAKey.generate_key(2048, parameters={"kid": "rsa-2"})
    unknown = provider.token(key=rotated)
    with pytest.raises(TokenError, match="does not publish"):
        await verifier.verify(unknown)
    provider.keys.append(rotated)
    provider.publish()
    assert (await verifier.verify(unknown)).subject == "ana"


async def test_garbage_and_no_provider_are_refused(provider):
    with pytest.raises(TokenError, match="malformed"):
        await OidcVerifier(provider.settings()).verify("a.b.c")
    with pytest.raises(TokenError, match="no identity provider is configured"):
        await OidcVerifier(OidcSettings()).verify(provider.token())
    assert looks_like_jwt(provider.token()) and not looks_like_jwt("hs_0000000a_" + "x" * 43)


def test_an_issuer_needs_an_audience_and_keys():
    with pytest.raises(ValueError, match="audience is required"):
        OidcSettings(issuer=ISSUER, jwks_url="https://idp/jwks")
    with pytest.raises(ValueError, match="jwks_file or jwks_url"):
        OidcSettings(issuer=ISSUER, audience=AUDIENCE)


async def test_the_jwks_is_fetched_from_the_providers_url_and_again_for_a_new_key(provider):
    """A JWKS URL: a real HTTP server on loopback serving the provider's file."""
    import http.server
    import threading
    from functools import partial

    handler = partial(http.server.SimpleHTTPRequestHandler, directory=str(provider.jwks.parent))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/{provider.jwks.name}"
        settings = OidcSettings(issuer=ISSUER, audience=AUDIENCE, jwks_url=url)
        verifier = OidcVerifier(settings)
        assert (await verifier.verify(provider.token())).subject == "ana"
        rotated = RSAKey.generate_key(2048, parameters={"kid": "rsa-2"})
        provider.keys.append(rotated)
        provider.publish()
        verifier._fetched -= 60  # the last fetch longer ago than the refetch floor (MIN_REFETCH_S)
        assert (await verifier.verify(provider.token(key=rotated))).subject == "ana"
        gone = OidcVerifier(OidcSettings(issuer=ISSUER, audience=AUDIENCE, jwks_url=url + ".missing"))
        with pytest.raises(TokenError, match="cannot be read"):
            await gone.verify(provider.token())
    finally:
        server.shutdown()


async def test_a_jwks_file_that_cannot_be_read_refuses_tokens_until_it_can_and_keeps_the_keys_it_had(provider):
    verifier = OidcVerifier(provider.settings())
    good = provider.jwks.read_text()
    provider.jwks.write_text("{not json")
    with pytest.raises(TokenError, match="keys cannot be read"):
        await verifier.verify(provider.token())
    provider.jwks.unlink()
    with pytest.raises(TokenError, match="keys cannot be read"):
        await verifier.verify(provider.token())
    provider.jwks.write_text(good)
    assert (await verifier.verify(provider.token())).subject == "ana"
    provider.jwks.write_text('{"keys": "garbled"}')  # a bad rewrite later: the keys read before serve on
    assert (await verifier.verify(provider.token())).subject == "ana"
