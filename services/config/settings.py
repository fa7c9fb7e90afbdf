"""One settings object for every service, read from HYBRIDSEARCH_* environment variables.

Nested sections use a double underscore, e.g. HYBRIDSEARCH_BM25__K1=1.2 or
HYBRIDSEARCH_EXPANSION__LLM_URL=http://127.0.0.1:8080/v1.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

from pydantic import Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


from hybridsearch.config.collections import CollectionConfig, check_collections, load_collections_file
from hybridsearch.config.deployment import Endpoints, RedisSettings, SnapshotSettings, TopologySettings
from hybridsearch.config.stores import Bm25Settings, VectorSettings
from hybridsearch.config.search import (
    AdmissionSettings,
    ExpansionSettings,
    FusionSettings,
    GraphSettings,
    PagingSettings,
    QuerySettings,
    RerankSettings,
    ResilienceSettings,
)
from hybridsearch.config.access import AuthSettings, SealingSettings, TlsSettings


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="HYBRIDSEARCH_", env_nested_delimiter="__", extra="ignore")

    data_dir: Path = Path("var")
    # Exported ONNX models (embedder fp32, reranker); default data_dir/models.
    models_dir: Path | None = None
    endpoints: Endpoints = Field(default_factory=Endpoints)
    topology: TopologySettings = Field(default_factory=TopologySettings)
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
    query: QuerySettings = Field(default_factory=QuerySettings)
    # The API key clients (CLI, GatewayClient, loadtest) send; unset: data_dir/auth/admin.key when present.
    api_key: SecretStr | None = None
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
    def _no_moved_names(self) -> "Settings":
        """A query setting under the root name it had before the query section: refused, naming the new one
        (pydantic-settings would ignore it, and the deployment would run on the default unawares)."""
        moved = [name for name in QuerySettings.model_fields if f"HYBRIDSEARCH_{name.upper()}" in os.environ]
        if moved:
            raise ValueError("these settings moved into the query section: " + ", ".join(
                f"HYBRIDSEARCH_{n.upper()} is now HYBRIDSEARCH_QUERY__{n.upper()}" for n in moved))
        return self

    @model_validator(mode="after")
    def _declared_collections(self) -> "Settings":
        declared = load_collections_file(self.collections_file) if self.collections_file else {}
        self.collections = check_collections({**declared, **self.collections})
        return self


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()
