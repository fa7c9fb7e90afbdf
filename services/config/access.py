"""Who may call and what is sealed: API keys, sealing keys, TLS."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel




class AuthSettings(BaseModel):
    """API keys per tenant at the gateway (hybridsearch.security.apikeys, docs/security.md)."""

    # The keys file (sha256 hashes only; YAML or JSON, or a mounted Secret). Unset: no auth. `serve all`
    # makes data_dir/auth/keys.yaml and a local admin key beside it on first start.
    keys_file: Path | None = None
    # `serve all` with no keys_file: make data_dir/auth/keys.yaml and an admin key (false: run without auth).
    local_admin: bool = True


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
