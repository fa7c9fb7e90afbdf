"""Fault tooling (not the serving path): a user-space network fault proxy and the kill drill."""
