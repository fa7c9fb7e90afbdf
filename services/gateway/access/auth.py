"""Who may call the gateway: a server interceptor that authenticates every public RPC and checks the caller's
rights on every collection the request touches before the servicer sees it. A caller (gateway/access/caller.py)
is an API key, an API key acting for the principals it names in `x-hybridsearch-act-for` (each one its
`may_act_for` allows), or a bearer JWT of the identity provider (security/oidc.py, auth.oidc).

- no key, a garbled one, an unknown one, or more than one `authorization` header: UNAUTHENTICATED, with a
  message saying which;
- a key without the right on one of the request's collections: PERMISSION_DENIED naming that collection
  and the operation. The check runs before anything is read, so the answer is the same whether the
  collection exists or not;
- a collection name that is no collection name: INVALID_ARGUMENT (validation.check_collection's message);
- health checking and reflection are not public services of ours: they stay open (probes, grpcurl);
- a public method without a rule in METHOD_OPERATIONS, or whose request message has no entry in
  scope.SCOPE, is refused (fail closed), as is every call while the keys file cannot be read.

Which collections a request touches is scope.collections_of's answer, from one table (scope.SCOPE):
`collection` (empty: `default`, unless `collections` is set), every name in `collections`, and the
collections a `page_token`'s first page searched. Every message of a stream is checked. The one RPC
that lists collections (CollectionService.ListCollections) names none: the check passes it, and its
servicer lists only the collections the caller's key may read (`readable`: the key the check admitted,
kept in CALLER for the call). Keys and tokens never reach a log: refusals are logged with the key's id or the
token's subject only; calls on behalf of someone and refusals go to the audit log too (docs/security.md).
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextvars import ContextVar

import grpc

from hybridsearch.runtime import services
from hybridsearch.security.apikeys import AuthError, KeyFileError, KeyStore, Operation, authenticate
from hybridsearch.security.oidc import OidcVerifier, TokenError, looks_like_jwt
from hybridsearch.security.principals import ACT_FOR_HEADER, PrincipalError
from hybridsearch.config.access import OidcSettings
from hybridsearch.config.collections import CollectionConfig
from hybridsearch.security.acl import admits
from hybridsearch.v1 import common_pb2
from hybridsearch.config.settings import Settings
from hybridsearch.gateway.access.caller import Caller, acted_for
from hybridsearch.contract.errors import InvalidArgument
from hybridsearch.gateway.access.scope import Unscoped, collections_of

log = logging.getLogger(__name__)

# The public services' method prefixes (the service table: runtime/services.py).
PUBLIC_SERVICES = tuple(f"/hybridsearch.v1.{grpc_service}/" for s in services.SERVICES if s.public
                        for grpc_service in s.grpc)
METHOD_OPERATIONS: dict[str, Operation] = {
    "/hybridsearch.v1.SearchService/Search": "read",
    "/hybridsearch.v1.IngestService/Stats": "read",
    "/hybridsearch.v1.IngestService/Upsert": "write",
    "/hybridsearch.v1.IngestService/UpsertStream": "write",
    "/hybridsearch.v1.IngestService/Delete": "write",
    "/hybridsearch.v1.CollectionService/GetDocuments": "read",
    "/hybridsearch.v1.CollectionService/ListCollections": "read",  # lists only what the key may read
    "/hybridsearch.v1.CollectionService/DropCollection": "write",
    # Snapshots read and write whole collections, a restore under any name: admin keys only.
    "/hybridsearch.v1.SnapshotService/CreateSnapshot": "admin",
    "/hybridsearch.v1.SnapshotService/ListSnapshots": "admin",
    "/hybridsearch.v1.SnapshotService/RestoreSnapshot": "admin",
    "/hybridsearch.v1.SnapshotService/DeleteSnapshot": "admin",
    # Aliases: a re-index reads and writes a whole collection, a switch changes what every reader gets.
    "/hybridsearch.v1.AliasService/GetAlias": "admin",
    "/hybridsearch.v1.AliasService/ListAliases": "admin",
    "/hybridsearch.v1.AliasService/Reindex": "admin",
    "/hybridsearch.v1.AliasService/SwitchAlias": "admin",
    "/hybridsearch.v1.AliasService/RollbackAlias": "admin",
    "/hybridsearch.v1.AliasService/DropGeneration": "admin",
}
CODES = {"unauthenticated": grpc.StatusCode.UNAUTHENTICATED, "permission_denied": grpc.StatusCode.PERMISSION_DENIED}

Check = Callable[[object, grpc.aio.ServicerContext], Awaitable[None]]

# The key the access check admitted, for the rest of the call (unset: no check ran).
CALLER: ContextVar[Caller | None] = ContextVar("hybridsearch_caller", default=None)
# One JSON line for each call made on behalf of someone (a key acting for a user, a bearer token) and each refusal:
# who, for whom, what (docs/security.md "Audit"). A service key's own calls are its metrics' to count.
audit = logging.getLogger("hybridsearch.audit")


def readable(names: Iterable[str], auth_on: bool) -> list[str]:
    """The names the calling key may read: all of them with auth off, none when auth is on and no key was
    admitted for this call (fail closed)."""
    if not auth_on:
        return list(names)
    caller = CALLER.get()
    return [n for n in names if caller is not None and caller.may("read", n)]


def _checked(handler: grpc.RpcMethodHandler, check: Check) -> grpc.RpcMethodHandler:
    """The same handler with `check(request, context)` run on each request before the servicer gets it."""
    kw = {"request_deserializer": handler.request_deserializer, "response_serializer": handler.response_serializer}
    if handler.unary_unary:
        inner = handler.unary_unary

        async def unary(request, context):
            await check(request, context)
            return await inner(request, context)

        return grpc.unary_unary_rpc_method_handler(unary, **kw)
    if handler.stream_unary:
        inner_stream = handler.stream_unary

        async def stream(requests: AsyncIterator, context):
            async def checked():
                async for request in requests:
                    await check(request, context)
                    yield request

            return await inner_stream(checked(), context)

        return grpc.stream_unary_rpc_method_handler(stream, **kw)
    if handler.unary_stream:  # AliasService.Reindex: one request, its progress streamed
        inner_answers = handler.unary_stream

        async def answers(request, context):
            await check(request, context)
            async for answer in inner_answers(request, context):
                yield answer

        return grpc.unary_stream_rpc_method_handler(answers, **kw)
    raise TypeError("the public API has no bidirectional streaming methods")


def readers(config: CollectionConfig, auth_on: bool) -> common_pb2.Readers | None:
    """Whom this call reads a collection's documents as (security/acl.py): the admitted caller's principals, and
    whether the collection's default readers (config.acl) admit them. None (every document) with auth off, and for
    an admin key's own calls (it snapshots, restores and re-indexes whole collections anyway; acting for a user, it
    reads as the user); with auth on and no caller admitted, readers with no principal (fail closed: `*` only)."""
    if not auth_on:
        return None
    caller = CALLER.get()
    if caller is not None and caller.key is not None and caller.key.role == "admin" and not caller.acting_for:
        return None
    principals = sorted(caller.principals) if caller is not None else []
    return common_pb2.Readers(principals=principals,
                              default_readable=caller is not None and admits(config.acl.allow, config.acl.deny,
                                                                             principals))


class ApiKeyInterceptor(grpc.aio.ServerInterceptor):
    """Authenticates calls to the public services (an API key, acting for someone or not, or a bearer JWT of the
    identity provider) and authorises them on every collection they touch."""

    def __init__(self, store: KeyStore, verifier: OidcVerifier | None = None) -> None:
        self.store = store
        self.verifier = verifier or OidcVerifier(OidcSettings())

    async def intercept_service(self, continuation, handler_call_details):
        method = handler_call_details.method
        handler = await continuation(handler_call_details)
        if handler is None or not method.startswith(PUBLIC_SERVICES):
            return handler
        short = method.rsplit("/", 1)[-1]
        try:
            caller = await self.caller(handler_call_details.invocation_metadata or ())
        except AuthError as err:
            log.info("%s refused: %s", short, err)
            _audit(short, None, "refused", str(err))
            return _refused(handler, CODES[err.code], str(err))
        except PrincipalError as err:
            return _refused(handler, grpc.StatusCode.INVALID_ARGUMENT, str(err))
        except KeyFileError as err:
            log.error("%s refused: %s", short, err)
            return _refused(handler, grpc.StatusCode.UNAVAILABLE, "the gateway cannot read its API keys")
        operation = METHOD_OPERATIONS.get(method)
        if operation is None or not (handler.unary_unary or handler.stream_unary or handler.unary_stream):
            return _refused(handler, grpc.StatusCode.PERMISSION_DENIED, f"{short} has no access rule")
        if operation == "admin" and not (caller.key is not None and caller.key.role == "admin"):
            log.info("%s refused: %s is not an admin key", short, caller.who)
            _audit(short, caller, "refused", "admin keys only")
            return _refused(handler, grpc.StatusCode.PERMISSION_DENIED, f"{caller.who} may not call {short}: admin keys only")
        return _checked(handler, _collection_check(caller, operation, short))

    async def caller(self, metadata: Iterable[tuple[str, str | bytes]]) -> Caller:
        """Who the call is on behalf of: AuthError (unauthenticated; permission_denied for a key that may not act
        for whom it names), PrincipalError (a malformed act-for header)."""
        metadata = list(metadata)
        value = authorization(metadata)
        acting = [v for k, v in metadata if k.lower() == ACT_FOR_HEADER]
        if len(acting) > 1:
            raise AuthError("unauthenticated", f"more than one {ACT_FOR_HEADER} header: name the principals in one")
        credential = (value or "").strip().partition(" ")[2].strip()
        if value and value.strip().lower().startswith("bearer ") and looks_like_jwt(credential):
            if acting:
                raise AuthError("unauthenticated", f"{ACT_FOR_HEADER} is for API keys: a token is its own user's")
            try:
                identity = await self.verifier.verify(credential)
            except TokenError as err:
                raise AuthError("unauthenticated", str(err)) from None
            return Caller(identity.principals, subject=identity.subject, token_read=tuple(self.verifier.cfg.read))
        entry = authenticate(self.store.entries(), value)
        if not acting:
            return Caller(frozenset(entry.principals), key=entry)
        try:
            return Caller(acted_for(str(acting[0]), entry), key=entry, acting_for=True)
        except PermissionError as err:
            raise AuthError("permission_denied", str(err)) from None


KINDS = (("unary_unary", grpc.unary_unary_rpc_method_handler), ("stream_unary", grpc.stream_unary_rpc_method_handler),
         ("unary_stream", grpc.unary_stream_rpc_method_handler), ("stream_stream", grpc.stream_stream_rpc_method_handler))


def _refused(handler: grpc.RpcMethodHandler, code: grpc.StatusCode, message: str) -> grpc.RpcMethodHandler:
    """A handler of the same kind that fails the call at once, before reading any request."""
    async def refuse(request_or_requests, context: grpc.aio.ServicerContext) -> None:
        await context.abort(code, message)

    factory = next(make for kind, make in KINDS if getattr(handler, kind))
    return factory(refuse, request_deserializer=handler.request_deserializer,
                   response_serializer=handler.response_serializer)


def authorization(metadata: Iterable[tuple[str, str | bytes]]) -> str | None:
    """The call's one `authorization` value (None: none sent); AuthError when it sends several, which
    would leave the key that counts to whichever the server happened to read."""
    values = [value for key, value in metadata if key.lower() == "authorization"]
    if len(values) > 1:
        raise AuthError("unauthenticated", f"more than one authorization header ({len(values)}): "
                                           "send exactly one 'authorization: Bearer <key>'")
    return values[0] if values else None


Denial = tuple[grpc.StatusCode, str]  # the status a call is refused with, and its message


def refusal(caller: Caller, operation: Operation, request: object) -> Denial | None:
    """Why `caller` may not do `operation` with `request` (the status and its message), None when it may:
    every collection the request touches is checked (scope.collections_of), the first refused one named."""
    try:
        names = collections_of(request)
    except InvalidArgument as err:
        return grpc.StatusCode.INVALID_ARGUMENT, str(err)
    except Unscoped as err:
        return grpc.StatusCode.PERMISSION_DENIED, f"{err}: refused (fail closed)"
    for name in names:
        if not caller.may(operation, name):  # it says nothing about whether the collection exists
            return grpc.StatusCode.PERMISSION_DENIED, f"{caller.who} may not {operation} collection {name!r}"
    return None


def _collection_check(caller: Caller, operation: Operation, short: str) -> Check:
    async def check(request, context: grpc.aio.ServicerContext) -> None:
        CALLER.set(caller)  # awaited by the handler's own task: the servicer's code reads it
        refused = refusal(caller, operation, request)
        if refused is not None:
            code, message = refused
            if code == grpc.StatusCode.PERMISSION_DENIED:
                log.info("%s refused: %s", short, message)
                _audit(short, caller, "refused", message)
            await context.abort(code, message)
        if caller.acting_for or caller.key is None:
            _audit(short, caller, "admitted", "")

    return check


def _audit(method: str, caller: Caller | None, outcome: str, reason: str) -> None:
    if audit.isEnabledFor(logging.INFO):
        audit.info(json.dumps({"method": method, "outcome": outcome, **(caller.audit() if caller else {}),
                               **({"reason": reason} if reason else {})}, separators=(",", ":")))


def gateway_interceptors(settings: Settings) -> list[grpc.aio.ServerInterceptor]:
    """The API-key interceptor when a keys file is configured (auth on), else none."""
    if settings.auth.keys_file is None:
        log.warning("API keys: OFF (no auth.keys_file): every caller may read and write every collection")
        return []
    store = KeyStore(settings.auth.keys_file)
    store.entries()  # a missing or invalid keys file stops the gateway at start, with the reason
    log.info("API keys: on, keys file %s", settings.auth.keys_file)
    if settings.auth.oidc.issuer:
        log.info("bearer tokens of %s accepted (audience %s)", settings.auth.oidc.issuer, settings.auth.oidc.audience)
    return [ApiKeyInterceptor(store, OidcVerifier(settings.auth.oidc))]
