"""The dense leg: an embedding model plus Qdrant (embedded on one machine, a server on a cluster)."""
