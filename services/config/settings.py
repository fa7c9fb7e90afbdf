"""One settings object for every service, read from HYBRIDSEARCH_* environment variables.

Nested sections use a double underscore, e.g. HYBRIDSEARCH_BM25__K1=1.2 or
HYBRIDSEARCH_EXPANSION__LLM_URL=http://127.0.0.1:8080/v1.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


from hybridsearch.config.collections import CollectionConfig, check_collections, load_collections_file
from hybridsearch.config.deployment import Endpoints, RedisSettings, SnapshotSettings
from hybridsearch.config.stores import Bm25Settings, VectorSettings
from hybridsearch.config.search import ExpansionSettings, FusionSettings, GraphSettings, RerankSettings, PagingSettings, AdmissionSettings, ResilienceSettings
from hybridsearch.config.access import AuthSettings, SealingSettings, TlsSettings


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
