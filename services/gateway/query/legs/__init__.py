"""Retrieval legs: one interface (protocol.py), one module per leg, one registry (registry.py)."""
