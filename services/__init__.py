"""hybridsearch: hybrid search microservices.

Each service lives in its own subpackage (gateway, bm25, vector, expansion, fusion, reranker); what they
share lives in packages named for it: config (settings), contract (validation, limits), query (legs,
efforts), runtime (server, metrics, telemetry, the service table, model files), security, storage, text. The gRPC
stubs generated from protos/hybridsearch/v1 land in `hybridsearch.v1`.
"""

__version__ = "0.1.0"
