"""Reconcile: find and repair drift between the BM25 and the vector store from their content hashes."""
