"""IngestService: documents chunked and written to both stores, in one order with drops."""
