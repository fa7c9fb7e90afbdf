"""The query path: SearchService and its stages, in the order search.py runs them (docs/architecture.md)."""
