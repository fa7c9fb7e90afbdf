#!/opt/venv/bin/python
"""Exit 0 when the gRPC server at HOST:PORT reports SERVING (grpc.health.v1), else 1.

The chart's exec probe on Kubernetes servers that predate native gRPC probes (< 1.24):
    grpc-health-check 127.0.0.1:50052 [SERVICE]
"""

import sys

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from hybridsearch.config.settings import get_settings
from hybridsearch.security.tls import sync_channel


def main(argv: list[str]) -> int:
    if len(argv) not in (1, 2):
        print("usage: grpc-health-check HOST:PORT [SERVICE]", file=sys.stderr)
        return 2
    service = argv[1] if len(argv) == 2 else ""
    try:
        # TLS / mTLS from the container's HYBRIDSEARCH_TLS__* settings, as the service itself serves.
        with sync_channel(argv[0], get_settings()) as channel:
            reply = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=service), timeout=3.0
            )
    except grpc.RpcError as err:
        print(f"{argv[0]}: {err.code().name}: {err.details()}", file=sys.stderr)
        return 1
    status = health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)
    print(f"{argv[0]}: {status}")
    return 0 if reply.status == health_pb2.HealthCheckResponse.SERVING else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
