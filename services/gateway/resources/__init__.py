"""Collections, their documents, aliases and snapshots as resources (CollectionService, AliasService, SnapshotService)."""
