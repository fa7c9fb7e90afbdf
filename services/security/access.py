"""How a client reaches the gateway: a channel (TLS when settings.tls.enabled) and the API key it sends.

The key is HYBRIDSEARCH_API_KEY when set, else the local admin key `serve all` made under
data_dir/auth (hybridsearch.security.apikeys), else none. The CLI, GatewayClient, the load generator and
the fault drill all come through here, so a user's shell and the tests find the key the same way.
"""

from __future__ import annotations

import secrets
from collections import namedtuple
from collections.abc import Sequence
from pathlib import Path

import grpc

from hybridsearch.security.apikeys import client_key, ensure_local_admin, local_auth_dir, write_private
from hybridsearch.config.settings import Settings, get_settings
from hybridsearch.security.principals import ACT_FOR_HEADER
from hybridsearch.runtime.server import CHANNEL_OPTIONS
from hybridsearch.security.tls import TlsFiles, aio_channel, ensure_local_certificates, sync_channel

Metadata = tuple[tuple[str, str], ...]


def api_key(settings: Settings) -> str | None:
    explicit = settings.api_key.get_secret_value() if settings.api_key else None
    return client_key(settings.data_dir, explicit)


def key_metadata(key: str | None, act_for: Sequence[str] = ()) -> Metadata:
    """The metadata every call carries: the key, and whom it acts for (a user and their groups; the key must be
    allowed to: `keys create --may-act-for`)."""
    acting = ((ACT_FOR_HEADER, ",".join(act_for)),) if act_for else ()
    return ((("authorization", f"Bearer {key}"),) if key else ()) + acting


class _CallDetails(
    namedtuple("_CallDetails", ("method", "timeout", "metadata", "credentials", "wait_for_ready", "compression")),
    grpc.ClientCallDetails,
):
    """A blocking call's details with the key added (grpc.ClientCallDetails is abstract)."""


class SyncKeyMetadata(grpc.UnaryUnaryClientInterceptor, grpc.StreamUnaryClientInterceptor,
                      grpc.UnaryStreamClientInterceptor, grpc.StreamStreamClientInterceptor):
    """Adds the API key's metadata to every call of a blocking channel."""

    def __init__(self, metadata: Metadata) -> None:
        self.metadata = metadata

    def _with_key(self, d: grpc.ClientCallDetails) -> grpc.ClientCallDetails:
        return _CallDetails(d.method, d.timeout, [*(d.metadata or ()), *self.metadata], d.credentials,
                            d.wait_for_ready, getattr(d, "compression", None))

    def intercept_unary_unary(self, continuation, client_call_details, request):
        return continuation(self._with_key(client_call_details), request)

    def intercept_unary_stream(self, continuation, client_call_details, request):
        return continuation(self._with_key(client_call_details), request)

    def intercept_stream_unary(self, continuation, client_call_details, request_iterator):
        return continuation(self._with_key(client_call_details), request_iterator)

    def intercept_stream_stream(self, continuation, client_call_details, request_iterator):
        return continuation(self._with_key(client_call_details), request_iterator)


def gateway_channel(address: str, options: Sequence = CHANNEL_OPTIONS, key: str | None = None,
                    settings: Settings | None = None, act_for: Sequence[str] = ()) -> grpc.Channel:
    """A blocking channel to the gateway whose every call carries the API key (and whom it acts for)."""
    settings = settings or get_settings()
    channel = sync_channel(address, settings, options, internal=False)
    metadata = key_metadata(key or api_key(settings), act_for)
    return grpc.intercept_channel(channel, SyncKeyMetadata(metadata)) if metadata else channel


class _KeyMetadata:
    def __init__(self, metadata: Metadata) -> None:
        self.metadata = metadata

    def _with_key(self, details: grpc.aio.ClientCallDetails) -> grpc.aio.ClientCallDetails:
        return details._replace(metadata=grpc.aio.Metadata(*(details.metadata or ()), *self.metadata))


# One class per call kind: grpc.aio files an interceptor under the FIRST kind it implements only (an
# `elif` chain in grpc.aio.Channel), so one class for both would leave client streams without the key.
class UnaryKeyMetadata(_KeyMetadata, grpc.aio.UnaryUnaryClientInterceptor):
    """Adds the API key's metadata to every unary call of an asyncio channel."""

    async def intercept_unary_unary(self, continuation, client_call_details, request):
        return await continuation(self._with_key(client_call_details), request)


class StreamKeyMetadata(_KeyMetadata, grpc.aio.StreamUnaryClientInterceptor):
    """Adds the API key's metadata to every client-streaming call of an asyncio channel."""

    async def intercept_stream_unary(self, continuation, client_call_details, request_iterator):
        return await continuation(self._with_key(client_call_details), request_iterator)


def aio_gateway_channel(address: str, options: Sequence = CHANNEL_OPTIONS, key: str | None = None,
                        settings: Settings | None = None, act_for: Sequence[str] = ()) -> grpc.aio.Channel:
    """An asyncio channel to the gateway whose every call carries the API key (and whom it acts for)."""
    settings = settings or get_settings()
    metadata = key_metadata(key or api_key(settings), act_for)
    return aio_channel(address, settings, options, interceptors=[UnaryKeyMetadata(metadata), StreamKeyMetadata(metadata)] if metadata else None,
                       internal=False)


def ensure_paging_key(auth_dir: Path) -> str:
    """The page-token signing key of a one-machine stack (data_dir/auth/paging.key, made once, 0600)."""
    path = auth_dir / "paging.key"
    if not path.exists():
        write_private(path, secrets.token_urlsafe(32))  # 0600, atomic; makes the folder
    return path.read_text().strip()


def prepare_local(settings: Settings) -> tuple[dict[str, str], list[str]]:
    """`serve all` on one machine: the keys file and an admin key on first start (unless auth.local_admin is
    off or a keys file is configured) and, with tls.enabled, the local certificates. Returns the settings
    the services get on top of the environment, and notes for the console (paths, never a key)."""
    env, notes = {}, []
    if settings.auth.keys_file is None and settings.auth.local_admin:
        keys_file, admin_file = ensure_local_admin(local_auth_dir(settings.data_dir).resolve())
        env["HYBRIDSEARCH_AUTH__KEYS_FILE"] = str(keys_file)
        notes.append(f"auth: API keys on; admin key in {admin_file} (HYBRIDSEARCH_API_KEY overrides; "
                     f"more keys: hybridsearch keys create)")
    elif settings.auth.keys_file is None:
        notes.append("auth: OFF (auth.local_admin=false, no auth.keys_file)")
    else:
        notes.append(f"auth: API keys on, keys file {settings.auth.keys_file}")
    if settings.paging.secret is None:
        env["HYBRIDSEARCH_PAGING__SECRET"] = ensure_paging_key(local_auth_dir(settings.data_dir))
    if settings.tls.enabled:
        made = ensure_local_certificates(settings)
        notes.append(f"tls: gateway TLS, mutual TLS inside; CA {TlsFiles.of(settings).ca}" + (" (made now)" if made else ""))
    return env, notes
