"""`hybridsearch doctor`: what is up, which engines and models, Redis, Triton."""

from __future__ import annotations

import asyncio
import shutil

import grpc
import httpx
import redis
from rich.console import Console
from rich.table import Table

from hybridsearch.runtime import services
from hybridsearch.config.settings import get_settings
from hybridsearch.security.tls import sync_channel
from hybridsearch.launcher import grpc_healthy
from hybridsearch.v1 import common_pb2


def run_doctor(out: Console) -> int:
    settings = get_settings()
    ep = settings.endpoints
    table = Table(title="hybridsearch doctor")
    for col in ("component", "state", "details"):
        table.add_column(col)
    problems = 0

    for name in services.NAMES:
        if name in settings.topology.in_gateway:
            table.add_row(name, "[green]IN GATEWAY[/]", "topology.in_gateway: its code runs in the gateway's process")
            continue
        up = grpc_healthy(ep.addr(name))
        problems += not up
        table.add_row(name, "[green]SERVING[/]" if up else "[red]DOWN[/]", ep.addr(name))

    for name, addr in ((store, ep.addr(store)) for store in services.STORES):
        detail = _store_engine(name, addr)
        if detail:
            table.add_row(f"  {name} engine", "", detail)

    for row in _redis_rows(settings):
        table.add_row(*row)
    table.add_row("llm (expansion)", *_llm_state(settings))
    table.add_row("embedder", "", f"{settings.vector.embedder} (max {settings.vector.max_seq_length} tokens)")
    table.add_row("bm25 settings", "", f"k1={settings.bm25.k1} b={settings.bm25.b} stemmer={settings.bm25.stemmer} "
                  f"stopwords={settings.bm25.stopwords} title_boost={settings.bm25.title_boost}")

    for name, state, detail in asyncio.run(_sealed_rows(settings)):
        table.add_row(f"sealed {name}", state, detail)

    triton = asyncio.run(_triton_state(settings))
    table.add_row("triton (reranker)", *triton)
    out.print(table)
    return 1 if problems else 0


# maxmemory-policy values that evict keys: wrong for the state Redis (a hold or an alias evicted is lost).
EVICTING = ("allkeys-", "volatile-")


def _redis_rows(settings) -> list[tuple[str, str, str]]:
    """The state Redis and the cache Redis (RedisSettings): up, bounded, evicting as each role needs."""
    cfg = settings.redis
    roles = [("redis (state)", cfg.state_url, "holds, aliases, drop epochs, restore marks")]
    if cfg.cache_url and cfg.cache_url != cfg.state_url:
        roles.append(("redis (cache)", cfg.cache_url, "expansions, query vectors, page orders"))
    rows = []
    for name, url, holds in roles:
        try:
            client = redis.Redis.from_url(url, socket_connect_timeout=0.5, socket_timeout=1)
            try:
                memory = client.info("memory")
            finally:
                client.close()
        except (redis.RedisError, OSError) as err:
            missing = "" if shutil.which("redis-server") else " (redis-server is not installed)"
            rows.append((name, "[yellow]NOT RUNNING[/]", f"{url} unreachable ({type(err).__name__}){missing}"))
            continue
        policy, limit = memory.get("maxmemory_policy", "?"), int(memory.get("maxmemory", 0))
        used = f"{memory.get('used_memory_human', '?')} of {limit / 2**20:.0f} MB" if limit else \
            f"{memory.get('used_memory_human', '?')}, unbounded"
        warning = ""
        if name == "redis (state)" and policy.startswith(EVICTING):
            warning = f" — [red]{policy} may evict a hold or an alias: set maxmemory-policy noeviction[/]"
        elif len(roles) > 1 and not limit:
            warning = " — [yellow]no maxmemory: the caches only grow until their TTLs end[/]"
        rows.append((name, "[green]UP[/]", f"{url}: {holds}; {used}, {policy}{warning}"))
    return rows


def _llm_state(settings) -> tuple[str, str]:
    """The configured endpoint, or the llama.cpp server the launcher starts on llm_port."""
    cfg = settings.expansion
    url = cfg.llm_url or (cfg.served_llm_url if cfg.llm_serve else "")
    if not url:
        return "none", "pseudo-relevance feedback only (llm_serve is empty)"
    try:
        models = httpx.get(url.rstrip("/") + "/models", timeout=2.0).json()["data"]
        return "[green]UP[/]", f"{url} serving {', '.join(m['id'] for m in models)} (THOROUGH expansion)"
    except (httpx.HTTPError, ValueError, KeyError) as err:
        return "[yellow]DOWN[/]", f"{url}: {type(err).__name__} — THOROUGH expands with pseudo-relevance feedback"


def _store_engine(name: str, address: str) -> str:
    from hybridsearch.v1 import bm25_pb2_grpc, vector_pb2_grpc

    stub_cls = bm25_pb2_grpc.Bm25ServiceStub if name == "bm25" else vector_pb2_grpc.VectorServiceStub
    try:
        with sync_channel(address, get_settings()) as channel:
            stats = stub_cls(channel).Stats(common_pb2.StoreStatsRequest(collection="default"), timeout=5)
    except grpc.RpcError:
        return ""
    details = ", ".join(f"{k}={v}" for k, v in sorted(stats.details.items()))
    return f"{stats.engine}; default collection: {stats.documents} docs / {stats.chunks} chunks; {details}"


async def _sealed_rows(settings) -> list[tuple[str, str, str]]:
    """Per sealed collection: its active key id and its records per key id in each store (or how far a
    rotation is), or why it has no key."""
    from hybridsearch.security.keys_file import KeysFile, keys_path
    from hybridsearch.reconcile.rotate import Rotator, describe

    sealed = sorted(name for name, config in settings.collections.items() if config.sealed)
    if not sealed:
        return []
    file = KeysFile(keys_path(settings))
    rotator = Rotator(settings)
    rows = []
    try:
        for name in sealed:
            try:
                keys = file.collection(name)
            except (OSError, ValueError) as err:
                rows.append((name, "[red]NO KEYS FILE[/]", str(err)))
                continue
            if keys is None:
                rows.append((name, "[red]NO KEY[/]", f"`hybridsearch keys create -c {name}`"))
            elif keys.destroyed is not None:
                rows.append((name, "ERASED", f"keys {', '.join(keys.destroyed.key_ids)} destroyed at {keys.destroyed.at}"))
            else:
                try:
                    detail = describe(keys.active, await rotator.counts(name))
                except grpc.RpcError as err:
                    detail = f"stores not answering ({err.code().name})"
                rows.append((name, f"key {keys.active}", detail))
    finally:
        await rotator.close()
    return rows


async def _triton_state(settings) -> tuple[str, str]:
    from hybridsearch.reranker.client import RerankerClient

    client = RerankerClient(settings.rerank)
    try:
        info = await client.model_info()
    except Exception as err:
        return "[yellow]DOWN[/]", f"{settings.rerank.triton_url}: {type(err).__name__} — searches run without reranking"
    finally:
        await client.close()
    state = "[green]READY[/]"
    trained = "trained" if info["trained"] else "[yellow]UNTRAINED (fresh head): BALANCED does not rerank with it[/]"
    return state, f"{settings.rerank.triton_url} model {info['name']!r}, {trained}, {'GPU' if info['gpu'] else 'CPU'}"
