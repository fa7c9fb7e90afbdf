"""hybridsearch: hybrid search microservices.

Each service lives in its own subpackage (gateway, bm25, vector, expansion, fusion, reranker);
`common` holds configuration, telemetry and server bootstrap shared by all of them. The gRPC
stubs generated from protos/hybridsearch/v1 land in `hybridsearch.v1`.
"""

__version__ = "0.1.0"
