"""The public face: SearchService and IngestService, fanning out to every internal service."""
