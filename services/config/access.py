"""Who may call and what is sealed: API keys and identity-provider tokens, sealing keys, TLS."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, model_validator


class OidcSettings(BaseModel):
    """Bearer JWTs of the organisation's identity provider at the gateway (hybridsearch.security.oidc): a token
    whose signature, issuer, audience and times check is a caller `user:<user_claim>` with a `group:` per value of
    its groups claim, who may read the collections `read` names. Unset issuer: tokens are not accepted."""

    issuer: str = ""  # the `iss` every token must carry
    audience: str = ""  # the `aud` it must name (required with an issuer)
    # The provider's signing keys: a JWKS file (reread when it changes) or its URL (fetched, kept jwks_refresh_s).
    jwks_file: Path | None = None
    jwks_url: str = ""
    jwks_refresh_s: float = Field(300.0, gt=0)
    user_claim: str = "sub"
    groups_claim: str = "groups"  # a list of group names, or one comma-separated string
    leeway_s: int = Field(60, ge=0, le=600)  # clock skew allowed on exp, nbf and iat
    # Asymmetric algorithms only: an HMAC secret would be one the gateway shares with the provider, and `none` is
    # no signature.
    algorithms: list[Literal["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512",
                             "EdDSA"]] = ["RS256", "PS256", "ES256", "EdDSA"]
    read: list[str] = Field(default_factory=list)  # collections (names or prefix*) a token's caller may read

    @model_validator(mode="after")
    def _complete(self) -> "OidcSettings":
        if self.issuer and not self.audience:
            raise ValueError("auth.oidc.audience is required with auth.oidc.issuer (a token for another service "
                             "of the same provider must not pass)")
        if self.issuer and not (self.jwks_file or self.jwks_url):
            raise ValueError("auth.oidc needs jwks_file or jwks_url: the provider's signing keys")
        return self


class AuthSettings(BaseModel):
    """API keys per tenant at the gateway (hybridsearch.security.apikeys, docs/security.md), and bearer JWTs
    of an identity provider (oidc)."""

    # The keys file (sha256 hashes only; YAML or JSON, or a mounted Secret). Unset: no auth. `serve all`
    # makes data_dir/auth/keys.yaml and a local admin key beside it on first start.
    keys_file: Path | None = None
    # `serve all` with no keys_file: make data_dir/auth/keys.yaml and an admin key (false: run without auth).
    local_admin: bool = True
    oidc: OidcSettings = Field(default_factory=OidcSettings)


class SealingSettings(BaseModel):
    """Collection keys for sealed collections (hybridsearch.security.sealing, docs/security.md "Sealed at rest")."""

    # The keys file (YAML, 0600; a mounted Kubernetes Secret works the same). Unset: data_dir/sealing/keys.yaml,
    # which `hybridsearch keys create -c NAME` makes.
    keys_file: Path | None = None


class TlsSettings(BaseModel):
    """TLS at the gateway, mutual TLS between services (hybridsearch.security.tls, docs/security.md).

    Unset files default to what `make certs` / `serve all` make under data_dir/tls.
    """

    enabled: bool = False
    ca_file: Path | None = None  # the CA that signed every service's and internal client's certificate
    cert_file: Path | None = None  # this server's certificate and key
    key_file: Path | None = None
    client_cert_file: Path | None = None  # what internal callers present (mTLS)
    client_key_file: Path | None = None
    # The name checked in the servers' certificates instead of the dialled host (one name for every service).
    server_name: str = ""
    # Whether the public gateway also asks its clients for a certificate signed by ca_file.
    gateway_client_auth: bool = False
