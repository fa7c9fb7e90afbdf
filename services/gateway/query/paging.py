"""Paging that holds: the first page's order is kept, later pages read it through an opaque signed token.

A search that has more hits than its page stores the whole fused (and reranked) order in Redis under a
random id, with a TTL, and answers `next_page_token`. A request carrying that token reads the next page
from the stored order instead of running the query again, so a write, a fallback or a cache expiry
between two pages can neither repeat nor skip a hit while the token lives.

A token is `base64url(payload).base64url(HMAC-SHA256(secret, payload)[:16])`; the payload names the
stored order, the offset of the page it asks for, the query it belongs to (request_digest: the collections
the first page searched, in clear, and a hash of the request's query, collections and options) and when it
expires. A token that was altered, belongs to another query, or outlived its order is INVALID_ARGUMENT
with a message saying which; nothing in a token is trusted without its signature.

The gateway's access check (gateway/access/scope.py) reads the collections a token names WITHOUT the secret
(token_collections): it authorizes them before the servicer runs, so another tenant's token is
PERMISSION_DENIED naming its collection. Unverified names can only add refusals: the servicer still
checks the signature and that the token's digest (collections included) is the request's own.

Version 2 put the collections into the digest; a token of version 1 (issued before, at most ttl_s ago) is
refused with "page_token version 1 is not understood; run the search again".
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import logging
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass

from redis.exceptions import RedisError

from hybridsearch.config.deployment import RedisSettings
from hybridsearch.config.search import PagingSettings
from hybridsearch.contract.errors import InvalidArgument, Refusal
from hybridsearch.fusion.packed import FusedDoc, unpack_fused
from hybridsearch.v1 import paging_pb2, search_pb2
from hybridsearch.v1.fusion_pb2 import FusedHit

log = logging.getLogger(__name__)

TOKEN_VERSION = 2  # 2: the digest names the collections searched (version 1 tokens are refused)
SENT_WAIT_S = 1.0  # the stored order is built once the first page is sent, or after this long at the latest
WATCH_S = 0.5  # how often a Redis found unreachable is pinged until it answers again
# A payload naming MAX_COLLECTIONS (8) collections of 63 characters is ~600 bytes, ~800 in base64.
MAX_TOKEN_CHARS = 1024
KEY_PREFIX = "hybridsearch:order:"  # a KeptOrder (paging.proto); "page:" held the SearchHit-built StoredOrder


def order_key(collections: tuple[str, ...], order_id: str) -> str:
    """A stored order's Redis key: the collections its first page searched in clear, between commas
    (`hybridsearch:order:,notes,wiki,:<id>`), so dropping one finds its orders (collection_pattern)."""
    return f"{KEY_PREFIX},{','.join(collections)},:{order_id}"


def collection_pattern(collection: str) -> str:
    """The Redis glob (SCAN MATCH) of every stored order whose search read `collection` (names hold no
    ',' and no glob character)."""
    return f"{KEY_PREFIX}*,{collection},*"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def request_digest(request: search_pb2.SearchRequest, collections: tuple[str, ...], readers: str = "") -> str:
    """What makes two requests the same query for paging: everything but the page's own position, as
    `<collection>,<collection>...:<hash>`: the `collections` the request names (its plan's `requested`) in clear
    (digest_collections reads them), the hash over the whole request (collections included) and whom it read as
    (`readers`: SearchPlan.readers_key), so one reader's token is no page for another."""
    shape = search_pb2.SearchRequest()
    shape.CopyFrom(request)
    shape.ClearField("offset")
    shape.ClearField("page_token")
    shape.ClearField("top_k")
    shape.ClearField("explain")
    digest = hashlib.sha256(shape.SerializeToString(deterministic=True) + readers.encode()).hexdigest()[:24]
    return f"{','.join(collections)}:{digest}"


def digest_collections(digest: str) -> tuple[str, ...]:
    """The collections a request_digest names (collection names hold neither ',' nor ':')."""
    names, sep, _ = digest.rpartition(":")
    return tuple(names.split(",")) if sep else ()


def _payload(token: str) -> tuple[bytes, bytes]:
    """A token's payload and signature, unchecked; InvalidArgument when it is not shaped as a token."""
    if len(token) > MAX_TOKEN_CHARS or token.count(".") != 1:
        raise InvalidArgument("page_token is not a page token of this service")
    body, signature = token.split(".")
    try:
        return _unb64(body), _unb64(signature)
    except (ValueError, UnicodeEncodeError):
        raise InvalidArgument("page_token is not a page token of this service") from None


def token_collections(token: str) -> tuple[str, ...]:
    """The collections a page token names, read WITHOUT checking its signature: for the access check,
    which has no secret and may only add refusals with them. A token that cannot be read names none
    (PageTokens.check then refuses it); the names are as written, not validated."""
    try:
        fields = json.loads(_payload(token)[0])
    except (InvalidArgument, ValueError, RecursionError):  # ValueError: JSONDecodeError, UnicodeDecodeError
        return ()  # RecursionError: deeply nested JSON, which only a forged token holds
    digest = fields.get("d") if isinstance(fields, dict) else None
    return digest_collections(digest) if isinstance(digest, str) else ()


@dataclass(frozen=True)
class PageToken:
    order_id: str   # the stored order's key (random)
    offset: int     # the first hit of the page this token asks for
    digest: str     # request_digest of the query it belongs to
    expires: float  # epoch seconds

    @property
    def collections(self) -> tuple[str, ...]:
        """The collections the first page searched (a later page's token carries them on in its digest)."""
        return digest_collections(self.digest)


class PageTokens:
    """Signs and checks page tokens with one secret (shared by every gateway replica)."""

    def __init__(self, secret: bytes, ttl_s: float) -> None:
        if len(secret) < 16:
            raise ValueError("the paging secret must be at least 16 bytes")
        self.secret, self.ttl_s = secret, ttl_s

    def new_order_id(self) -> str:
        return secrets.token_hex(12)

    def _sign(self, payload: bytes) -> bytes:
        return hmac.new(self.secret, payload, hashlib.sha256).digest()[:16]

    def issue(self, order_id: str, offset: int, digest: str, now: float | None = None) -> str:
        expires = (now if now is not None else time.time()) + self.ttl_s
        payload = json.dumps({"v": TOKEN_VERSION, "id": order_id, "o": offset, "d": digest, "e": round(expires)},
                             separators=(",", ":")).encode()
        return f"{_b64(payload)}.{_b64(self._sign(payload))}"

    def check(self, token: str, digest: str, now: float | None = None) -> PageToken:
        """The token's contents, or InvalidArgument saying what is wrong with it."""
        payload, mac = _payload(token)
        if not hmac.compare_digest(mac, self._sign(payload)):
            raise InvalidArgument("page_token was altered or issued by another deployment (its signature does not match)")
        fields = json.loads(payload)
        if fields.get("v") != TOKEN_VERSION:
            raise InvalidArgument(f"page_token version {fields.get('v')} is not understood; run the search again")
        if (now if now is not None else time.time()) > fields["e"]:
            raise InvalidArgument("page_token expired; run the search again for a fresh first page")
        if fields["d"] != digest:
            raise InvalidArgument("page_token belongs to another query (query, collection or options differ)")
        return PageToken(order_id=fields["id"], offset=int(fields["o"]), digest=fields["d"], expires=fields["e"])


class PageStore:
    """Stored orders in Redis (a `redis.asyncio` client), each with the tokens' TTL."""

    def __init__(self, client, ttl_s: float) -> None:
        self.client, self.ttl_s = client, ttl_s

    async def save(self, key: str, order: paging_pb2.KeptOrder) -> None:
        await self.client.set(key, order.SerializeToString(), ex=max(1, round(self.ttl_s)))

    async def load(self, key: str) -> paging_pb2.KeptOrder:
        raw = await self.client.get(key)
        if raw is None:
            raise InvalidArgument("page_token expired (its stored order is gone); run the search again")
        return paging_pb2.KeptOrder.FromString(raw)


class Pager:
    """The gateway's paging: keeps a first page's order, answers later pages from it.

    The order is built and written after the answer has gone (a task), so a first page costs its caller
    nothing; a later page that arrives before that write finished waits for it. While Redis is
    unreachable first pages carry no token and say why; a watch pings it every WATCH_S meanwhile, so the
    first answer after it is back carries a token again."""

    def __init__(self, cfg: PagingSettings, redis_settings: RedisSettings) -> None:
        secret = cfg.secret.get_secret_value().encode() if cfg.secret else None
        if secret is None and cfg.max_hits:
            log.warning("paging.secret is not set: page tokens are signed with a key of this process only "
                        "(another replica, or this one after a restart, refuses them)")
        self.tokens = PageTokens(secret or secrets.token_bytes(32), cfg.ttl_s)
        client = redis_settings.cache()
        self.store = PageStore(client, cfg.ttl_s)
        self.max_hits = cfg.max_hits
        self.reachable = True
        self._pending: dict[str, asyncio.Task] = {}
        self._watch: asyncio.Task | None = None  # while Redis is unreachable: pings it until it answers

    def keep(self, request: search_pb2.SearchRequest, collections: tuple[str, ...], first: search_pb2.SearchResponse,
             order: Callable[[int], paging_pb2.KeptOrder], candidates: int, next_offset: int,
             sent: asyncio.Future | None = None, readers: str = "") -> None:
        """After a first page with more hits than it shows: sets its next_page_token and stores `order(n)`
        (the first n hits in final order with their scores) in the background, once `sent` is done (the
        page has gone to its caller: building and writing up to max_hits hits must not delay it)."""
        if not self.max_hits or next_offset >= min(candidates, self.max_hits):
            return
        head = search_pb2.SearchResponse(legs=first.legs, degraded=first.degraded, mode=first.mode,
                                         effort=first.effort, notices=first.notices,
                                         total_candidates=first.total_candidates)
        order_id = self.tokens.new_order_id()
        if self.reachable:
            first.next_page_token = self.tokens.issue(order_id, next_offset,
                                                      request_digest(request, collections, readers))
        else:
            first.notices.append("no next_page_token: the page store (Redis) is not reachable")
        key = order_key(collections, order_id)
        task = asyncio.ensure_future(self._save(key, head, order, min(candidates, self.max_hits), sent))
        self._pending[order_id] = task
        task.add_done_callback(lambda _t: self._pending.pop(order_id, None))

    async def _save(self, key: str, head: search_pb2.SearchResponse,
                    order: Callable[[int], paging_pb2.KeptOrder], n: int,
                    sent: asyncio.Future | None = None) -> None:
        if sent is not None:
            await asyncio.wait({sent}, timeout=SENT_WAIT_S)
        kept = order(n)
        kept.head.CopyFrom(head)
        try:
            await self.store.save(key, kept)
            if not self.reachable:
                log.info("the page store (Redis) is reachable again: page tokens on")
            self.reachable = True
        except (RedisError, OSError) as err:
            if self.reachable:
                log.warning("the page store (Redis) is not reachable (%s): answers carry no page token", err)
            self.reachable = False
            if self._watch is None or self._watch.done():
                self._watch = asyncio.ensure_future(self._until_reachable())

    async def _until_reachable(self) -> None:
        while not self.reachable:
            await asyncio.sleep(WATCH_S)
            try:
                await self.store.client.ping()
            except (RedisError, OSError):
                continue
            log.info("the page store (Redis) is reachable again: page tokens on")
            self.reachable = True

    async def page(self, request: search_pb2.SearchRequest, collections: tuple[str, ...], size: int,
                   readers: str = "") -> tuple[PageToken, paging_pb2.KeptOrder, list[FusedDoc | FusedHit], str]:
        """A later page's token, its stored order and that order's hits (`kept_hits`), and the token of the page
        after it ("" after the last); InvalidArgument (bad, foreign, expired token) / Refusal (no Redis)."""
        token = self.tokens.check(request.page_token, request_digest(request, collections, readers))
        pending = self._pending.get(token.order_id)
        if pending is not None:
            await asyncio.shield(pending)
        try:
            order = await self.store.load(order_key(token.collections, token.order_id))
        except (RedisError, OSError) as err:
            raise Refusal(f"the page store (Redis) is not reachable ({type(err).__name__}); retry later") from err
        hits, following = kept_hits(order), token.offset + size
        return token, order, hits, self.tokens.issue(token.order_id, following, token.digest) if following < len(hits) else ""

    async def close(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
        await self.store.client.aclose()


def kept_hits(order: paging_pb2.KeptOrder) -> list[FusedDoc | FusedHit]:
    """A kept order's hits in final order: its columns (KeptOrder.fused), or the FusedHits an order kept by an
    earlier version holds."""
    return unpack_fused(order.fused) if order.fused.doc_ids or not order.hits else list(order.hits)
