"""Snapshots of a collection: one point in its write order across both stores and its settings, kept in a
repository (a folder or S3), restored whole or not at all. docs/operations.md."""
