"""Bearer JWTs of the organisation's identity provider (auth.oidc; joserfc, a kept library): a token is a caller
when its signature checks against the provider's signing keys (a JWKS file or URL) with one of the configured
asymmetric algorithms, its `iss` is the issuer, its `aud` names the audience, and `exp` (required), `nbf` and
`iat` hold within the leeway. Its principals: `user:<user_claim>` and a `group:<name>` for each value of its
groups claim (a value that is no principal name is left out: it could only ever grant, never take away).

Everything else is UNAUTHENTICATED with a message that says what failed and carries nothing of the token:
`alg: none`, an HMAC algorithm, a key id the provider does not publish, a signature that does not check, an
expired or not-yet-valid token, another issuer or audience, a missing subject. An unknown key id fetches the
JWKS once more (the provider rotated), at most every MIN_REFETCH_S.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import urllib.request
from dataclasses import dataclass

from joserfc import jwt
from joserfc.errors import (BadSignatureError, ExpiredTokenError, InvalidClaimError, InvalidKeyIdError, JoseError,
                            MissingClaimError, UnsupportedAlgorithmError)
from joserfc.jwk import KeySet

from hybridsearch.config.access import OidcSettings
from hybridsearch.security.principals import PRINCIPAL

log = logging.getLogger(__name__)

MIN_REFETCH_S = 30.0  # an unknown key id fetches the JWKS again no more often than this
FETCH_TIMEOUT_S = 5.0
MAX_TOKEN_CHARS = 16_384


class TokenError(Exception):
    """A token that is no caller; the message is safe to return (nothing of the token in it)."""


@dataclass(frozen=True)
class TokenIdentity:
    subject: str
    groups: tuple[str, ...]

    @property
    def principals(self) -> frozenset[str]:
        return frozenset({f"user:{self.subject}", *(f"group:{g}" for g in self.groups)})


def looks_like_jwt(value: str) -> bool:
    """A compact JWS (three base64url parts): what the gateway hands to the verifier rather than the API keys."""
    return value.count(".") == 2 and not value.startswith("hs_")


class OidcVerifier:
    def __init__(self, cfg: OidcSettings) -> None:
        self.cfg = cfg
        self._keys: KeySet | None = None
        self._fetched = 0.0  # when the keys were last read (monotonic)
        self._stamp: tuple[int, int, int] | None = None  # the JWKS file's (mtime, size, inode) when read
        self._lock = asyncio.Lock()

    @property
    def enabled(self) -> bool:
        return bool(self.cfg.issuer)

    async def verify(self, token: str) -> TokenIdentity:
        if not self.enabled:
            raise TokenError("bearer tokens are not accepted here (no identity provider is configured: auth.oidc)")
        if len(token) > MAX_TOKEN_CHARS:
            raise TokenError(f"bearer token is over {MAX_TOKEN_CHARS} characters")
        try:
            decoded = await self._decoded(token)
        except TokenError:
            raise
        except UnsupportedAlgorithmError:
            raise TokenError(f"token algorithm not accepted: use one of {', '.join(self.cfg.algorithms)}") from None
        except BadSignatureError:
            raise TokenError("token signature does not check against the identity provider's keys") from None
        except (JoseError, ValueError, TypeError, KeyError):
            raise TokenError("malformed bearer token: not a JWT signed by the identity provider") from None
        claims = decoded.claims
        registry = jwt.JWTClaimsRegistry(leeway=self.cfg.leeway_s, iss={"essential": True, "value": self.cfg.issuer},
                                         aud={"essential": True, "value": self.cfg.audience}, exp={"essential": True})
        try:
            registry.validate(claims)
        except ExpiredTokenError:
            raise TokenError("token expired") from None
        except MissingClaimError as err:
            raise TokenError(f"token lacks a required claim ({err.description})") from None
        except InvalidClaimError as err:
            raise TokenError(f"token claim not accepted ({err.description}): another issuer or audience, or not "
                             "valid yet") from None
        except JoseError:
            raise TokenError("token claims not accepted") from None
        subject = claims.get(self.cfg.user_claim)
        if not isinstance(subject, str) or not PRINCIPAL.fullmatch(f"user:{subject}"):
            raise TokenError(f"token's {self.cfg.user_claim!r} claim is no user name this service reads")
        return TokenIdentity(subject, tuple(dict.fromkeys(self._groups(claims.get(self.cfg.groups_claim)))))

    def _groups(self, value) -> list[str]:
        names = value.split(",") if isinstance(value, str) else value if isinstance(value, list) else []
        out = []
        for name in names:
            if isinstance(name, str) and PRINCIPAL.fullmatch(f"group:{name.strip()}"):
                out.append(name.strip())
            else:
                log.warning("a token's group %r is no principal name: left out", str(name)[:80])
        return out

    async def _decoded(self, token: str):
        keys = await self._key_set()
        try:
            return jwt.decode(token, keys, algorithms=self.cfg.algorithms)
        except InvalidKeyIdError:  # a key id the keys do not hold: the provider may have rotated since they were read
            fresh = await self._key_set(refetch=True)
            try:
                return jwt.decode(token, fresh, algorithms=self.cfg.algorithms)
            except InvalidKeyIdError:
                raise TokenError("token signed with a key the identity provider does not publish") from None

    async def _key_set(self, refetch: bool = False) -> KeySet:
        async with self._lock:
            now = time.monotonic()
            if self.cfg.jwks_file is not None:
                try:
                    st = self.cfg.jwks_file.stat()
                    stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
                    if self._keys is None or stamp != self._stamp:
                        self._keys, self._stamp = read_key_set(self.cfg.jwks_file.read_text()), stamp
                except (OSError, ValueError, JoseError) as err:
                    if self._keys is None:
                        raise TokenError("the identity provider's keys cannot be read; retry later") from err
                    log.warning("the JWKS file %s cannot be read (%s): the keys read before serve", self.cfg.jwks_file,
                                err)
                return self._keys
            stale = self._keys is None or now - self._fetched > self.cfg.jwks_refresh_s
            if stale or (refetch and now - self._fetched > MIN_REFETCH_S):
                try:
                    text = await asyncio.to_thread(_fetch, self.cfg.jwks_url)
                    self._keys, self._fetched = read_key_set(text), now
                except (OSError, ValueError, JoseError) as err:
                    if self._keys is None:
                        raise TokenError("the identity provider's keys cannot be read; retry later") from err
                    log.warning("the JWKS at %s cannot be read (%s): the keys read before serve", self.cfg.jwks_url, err)
            return self._keys


def read_key_set(text: str) -> KeySet:
    """The public keys of a JWKS document (private parts, were a file to hold them, are not kept)."""
    data = json.loads(text)
    if not isinstance(data, dict) or not isinstance(data.get("keys"), list):
        raise ValueError("a JWKS is a JSON object with a list under 'keys'")
    return KeySet.import_key_set({"keys": [{k: v for k, v in key.items() if k not in {"d", "p", "q", "dp", "dq", "qi"}}
                                           for key in data["keys"] if isinstance(key, dict)]})


def _fetch(url: str) -> str:
    with urllib.request.urlopen(url, timeout=FETCH_TIMEOUT_S) as answer:  # noqa: S310 - an operator's URL
        return answer.read(1_000_000).decode()
