"""Fusion of ranked lists: weighted RRF, min-max linear, DBSF. `methods` works without the service."""
