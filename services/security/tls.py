"""TLS at the gateway, mutual TLS between services: local certificates and every gRPC credential.

`make certs` (and `serve all` with tls.enabled, on first start) makes a local CA and, signed by it, a
server certificate (SANs: localhost, 127.0.0.1, ::1 and the service names) and a client certificate for
internal callers, with the `cryptography` library, into data_dir/tls. On Kubernetes the same settings
point at Secrets (cert-manager's tls.crt / tls.key / ca.crt).

Who checks what: internal services (bm25, vector, expansion, fusion) require a client certificate signed
by the CA; the gateway serves TLS to anyone (clients authenticate with API keys) unless
tls.gateway_client_auth asks for certificates too. Every channel verifies the server against the CA.
This module is the one place that decides secure or insecure: servers bind through `add_port`, channels
come from `aio_channel` / `sync_channel`.
"""

from __future__ import annotations

import datetime
import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import grpc
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from hybridsearch.runtime import services
from hybridsearch.security.apikeys import write_private
from hybridsearch.config.settings import Settings

SERVICE_NAMES = services.NAMES
LOCAL_DNS = ("localhost", *SERVICE_NAMES)
LOCAL_IPS = ("127.0.0.1", "::1")
PUBLIC_SERVICES = services.PUBLIC


def local_tls_dir(data_dir: Path) -> Path:
    """Where `make certs` and `serve all` keep one machine's CA, certificates and keys."""
    return data_dir / "tls"


class TlsConfigError(RuntimeError):
    """tls.enabled but a certificate or key file is missing."""


@dataclass(frozen=True)
class TlsFiles:
    ca: Path
    cert: Path
    key: Path
    client_cert: Path
    client_key: Path

    @classmethod
    def of(cls, settings: Settings) -> TlsFiles:
        """The configured files; unset ones are those `make certs` makes under data_dir/tls."""
        cfg, base = settings.tls, local_tls_dir(settings.data_dir)
        return cls(cfg.ca_file or base / "ca.crt", cfg.cert_file or base / "server.crt", cfg.key_file or base / "server.key",
                   cfg.client_cert_file or base / "client.crt", cfg.client_key_file or base / "client.key")


def _read(path: Path, what: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError:
        raise TlsConfigError(f"tls.enabled but the {what} {path} cannot be read: run `make certs` (one machine) "
                             f"or set HYBRIDSEARCH_TLS__* to the mounted Secret's files") from None


# --- credentials -------------------------------------------------------------------------------------------

def server_credentials(settings: Settings, service: str) -> grpc.ServerCredentials | None:
    """None without TLS; internal services require client certificates (mTLS)."""
    if not settings.tls.enabled:
        return None
    files = TlsFiles.of(settings)
    require = service not in PUBLIC_SERVICES or settings.tls.gateway_client_auth
    pair = (_read(files.key, "server key"), _read(files.cert, "server certificate"))
    return grpc.ssl_server_credentials([pair], root_certificates=_read(files.ca, "CA certificate") if require else None,
                                       require_client_auth=require)


def add_port(server: grpc.aio.Server, service: str, address: str, settings: Settings) -> int:
    """Binds the server's port, TLS or plaintext as configured; 0 when the port cannot be bound."""
    creds = server_credentials(settings, service)
    return server.add_insecure_port(address) if creds is None else server.add_secure_port(address, creds)


def channel_credentials(settings: Settings, internal: bool = True) -> grpc.ChannelCredentials | None:
    """None without TLS. Internal callers present the client certificate; public ones only check the server
    (and present it too when the gateway asks for certificates)."""
    if not settings.tls.enabled:
        return None
    files = TlsFiles.of(settings)
    ca = _read(files.ca, "CA certificate")
    if internal or settings.tls.gateway_client_auth:
        return grpc.ssl_channel_credentials(ca, _read(files.client_key, "client key"),
                                            _read(files.client_cert, "client certificate"))
    return grpc.ssl_channel_credentials(ca)


def _options(settings: Settings, options: Sequence) -> list:
    name = settings.tls.server_name
    return [*options, ("grpc.ssl_target_name_override", name)] if settings.tls.enabled and name else list(options)


def aio_channel(address: str, settings: Settings, options: Sequence = (), interceptors=None,
                internal: bool = True) -> grpc.aio.Channel:
    creds = channel_credentials(settings, internal)
    if creds is None:
        return grpc.aio.insecure_channel(address, options=list(options), interceptors=interceptors)
    return grpc.aio.secure_channel(address, creds, options=_options(settings, options), interceptors=interceptors)


def sync_channel(address: str, settings: Settings, options: Sequence = (), internal: bool = True) -> grpc.Channel:
    creds = channel_credentials(settings, internal)
    if creds is None:
        return grpc.insecure_channel(address, options=list(options))
    return grpc.secure_channel(address, creds, options=_options(settings, options))


# --- local certificates ------------------------------------------------------------------------------------

def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "hybridsearch (local)"),
                      x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _pem_key(key: ec.EllipticCurvePrivateKey) -> str:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()).decode()


def _pem_cert(cert: x509.Certificate) -> str:
    return cert.public_bytes(serialization.Encoding.PEM).decode()


def _signed(subject: str, key, ca_name: x509.Name, ca_key, days: int, ca: bool = False,
            usage: ExtendedKeyUsageOID | None = None, sans: list[x509.GeneralName] | None = None) -> x509.Certificate:
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (x509.CertificateBuilder().subject_name(_name(subject)).issuer_name(ca_name)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=days))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=0 if ca else None), critical=True)
               .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False))
    if ca:
        builder = builder.add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
    else:
        builder = builder.add_extension(x509.KeyUsage(True, False, False, False, False, False, False, False, False), critical=True)
        builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return builder.sign(ca_key, hashes.SHA256())


def make_certificates(out: Path, dns_names: Sequence[str] = (), ip_addresses: Sequence[str] = ()) -> list[Path]:
    """A local CA, a server certificate and an internal client certificate under `out`; keys are 0600.

    Returns the files written. The server certificate names localhost, 127.0.0.1, ::1, the service names
    and any extra `dns_names` / `ip_addresses`.
    """
    ca_key = _key()
    ca_name = _name("hybridsearch local CA")
    ca_cert = _signed("hybridsearch local CA", ca_key, ca_name, ca_key, 3650, ca=True)
    sans: list[x509.GeneralName] = [x509.DNSName(n) for n in dict.fromkeys([*LOCAL_DNS, *dns_names])]
    sans += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in dict.fromkeys([*LOCAL_IPS, *ip_addresses])]
    server_key, client_key = _key(), _key()
    server = _signed("hybridsearch services", server_key, ca_name, ca_key, 825, usage=ExtendedKeyUsageOID.SERVER_AUTH, sans=sans)
    client = _signed("hybridsearch internal client", client_key, ca_name, ca_key, 825, usage=ExtendedKeyUsageOID.CLIENT_AUTH)
    written = []
    for name, text, private in (("ca.key", _pem_key(ca_key), True), ("ca.crt", _pem_cert(ca_cert), False),
                                ("server.key", _pem_key(server_key), True), ("server.crt", _pem_cert(server), False),
                                ("client.key", _pem_key(client_key), True), ("client.crt", _pem_cert(client), False)):
        path = out / name
        write_private(path, text)
        if not private:
            path.chmod(0o644)
        written.append(path)
    return written


def ensure_local_certificates(settings: Settings) -> bool:
    """One machine: makes data_dir/tls on first start when TLS is on and the default files are used.
    Returns whether certificates were made."""
    cfg = settings.tls
    own_files = any((cfg.ca_file, cfg.cert_file, cfg.key_file, cfg.client_cert_file, cfg.client_key_file))
    if not cfg.enabled or own_files or TlsFiles.of(settings).cert.exists():
        return False
    hosts = {settings.endpoints.host, *(settings.endpoints.addr(s).rsplit(":", 1)[0] for s in SERVICE_NAMES)}
    ips, names = [], []
    for host in hosts - {"0.0.0.0", "::", ""}:
        try:
            ips.append(str(ipaddress.ip_address(host.strip("[]"))))
        except ValueError:
            names.append(host)
    make_certificates(local_tls_dir(settings.data_dir), names, ips)
    return True
