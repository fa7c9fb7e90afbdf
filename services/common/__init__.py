"""Configuration, telemetry, validation and server bootstrap shared by every service."""
