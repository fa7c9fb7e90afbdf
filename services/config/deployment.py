"""Where the parts are and what they keep: the services' endpoints, which run inside the gateway, Redis in its two
roles, snapshot repositories."""

from __future__ import annotations

from pydantic import BaseModel, Field, field_validator

from hybridsearch.runtime import services


class Endpoints(BaseModel):
    """Where each service listens (server side) and is reached (client side): a port and an address per
    service of the table (runtime.services; tests/runtime/test_services.py checks the fields are its rows)."""

    host: str = "127.0.0.1"
    gateway_port: int = services.BY_NAME["gateway"].port
    bm25_port: int = services.BY_NAME["bm25"].port
    vector_port: int = services.BY_NAME["vector"].port
    expansion_port: int = services.BY_NAME["expansion"].port
    fusion_port: int = services.BY_NAME["fusion"].port
    # Addresses other services dial; empty means host:port above. On Kubernetes these are
    # service DNS names (bm25:50052).
    bm25_addr: str = ""
    vector_addr: str = ""
    expansion_addr: str = ""
    fusion_addr: str = ""
    gateway_addr: str = ""

    def addr(self, service: str) -> str:
        explicit = getattr(self, f"{service}_addr")
        return explicit or f"{self.host}:{getattr(self, f'{service}_port')}"


class RedisSettings(BaseModel):
    """The deployment's Redis in its two roles (docs/operations.md, "Redis"). State must never be evicted: drop
    epochs, restore marks, holds, aliases (serve all: an append-only file, noeviction). Caches may be: expansion
    answers, query vectors, page orders (serve all: at most cache_max_mb, least recently used evicted first,
    nothing on disk); a full cache evicts, it never refuses a write or pushes state out."""
    state_url: str = "redis://127.0.0.1:6379/0"
    # Empty: the caches share the state Redis, bounded by their TTLs only (one Redis that must not evict).
    cache_url: str = "redis://127.0.0.1:6380/0"
    cache_max_mb: int = Field(256, ge=8)

    @property
    def cache_at(self) -> str:
        """The URL the caches use."""
        return self.cache_url or self.state_url

    def state(self, timeout_s: float = 5.0):
        """An asyncio client of the state Redis: a connection fails in 0.5 s, a command waits at most
        `timeout_s` (a write's hold or a drop's epoch is worth waiting a little for)."""
        return _client(self.state_url, timeout_s)

    def cache(self, timeout_s: float = 0.5):
        """An asyncio client of the cache Redis: a cache that does not answer in `timeout_s` is skipped."""
        return _client(self.cache_at, timeout_s)


def _client(url: str, timeout_s: float):
    """After a Redis restart a pooled connection's socket is dead: the command it carries (a hold's release, a
    page order) is sent once more on a fresh connection instead of failing (every command here is safe to
    repeat: compare-and-delete, set-if-absent by a value naming its holder, epoch bumps, cache entries)."""
    import redis.asyncio as redis  # here, not at the top: settings load without Redis's client
    from redis.asyncio.retry import Retry
    from redis.backoff import NoBackoff

    return redis.Redis.from_url(url, socket_connect_timeout=0.5, socket_timeout=timeout_s, retry=Retry(NoBackoff(), 1))


class TopologySettings(BaseModel):
    """Which stateless services run inside the gateway's process instead of their own (docs/performance.md,
    "Topology"): the same code, without the hop (fusion's library, gateway.query.fuse; expansion's servicer,
    expansion.in_process); the launcher starts no process for them, the chart deploys no pods, the doctor says
    where they are.

    One machine's default is both inside the gateway. Fusion (docs/perf/topology-s37): a FAST answer costs 1.0-1.5 ms
    less CPU (2.49-2.52x the in-process baseline against 2.69-2.79x) and comes 10% sooner, and the closed loops
    answer more at a lower p99. Expansion (docs/perf/topology-s38, docs/perf/session-s38/two-gateways.txt): a BALANCED
    answer costs 1.2 ms less CPU and comes 0.8-0.9 ms sooner (two gateways on one stack, asked in turn), 1.3 ms
    sooner and 1.6-2.3 ms cheaper in `speed` (p50 3.83-3.87x the baseline against 4.00-4.05x); BM25-only and FAST
    answers cost the same; the closed loops moved within the machine's noise. What it costs the
    gateway: the language detector's ~370 MB and ~3 s at start (the expansion process had them). The chart keeps
    both Deployments of their own (its values' `topology.inGateway: []`): on a cluster they scale apart from the
    gateways, and that trade was not measured here. `[]` puts them in processes of their own here too."""

    in_gateway: list[str] = Field(default_factory=lambda: ["fusion", "expansion"])

    @field_validator("in_gateway")
    @classmethod
    def _colocatable(cls, names: list[str]) -> list[str]:
        if wrong := [n for n in names if n not in services.COLOCATABLE]:
            raise ValueError(f"{wrong} cannot run inside the gateway: only {list(services.COLOCATABLE)} can "
                             "(stateless; the stores keep their own processes)")
        return list(dict.fromkeys(names))


class SnapshotSettings(BaseModel):
    """Where snapshots go (hybridsearch.snapshots, docs/operations.md): a folder, or `s3://bucket/prefix` read and
    written by every store service and the gateway with boto3 (credentials from AWS's usual variables or the
    pod's role). Unset: data_dir/snapshots/repository."""

    repository: str = ""
    s3_endpoint_url: str | None = None  # another S3-API server than AWS's (MinIO, moto in the tests)
    s3_region: str = "us-east-1"
