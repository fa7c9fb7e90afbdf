"""The lexical leg: BM25 over an embedded engine on one machine, OpenSearch on a cluster."""
