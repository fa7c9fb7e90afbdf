"""How a process serves: the service table, the gRPC server, metrics, telemetry, model files."""
