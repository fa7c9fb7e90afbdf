"""The stack's services, one row each: the one list of the five Python services.

Every part that names them reads this table: the launcher (which it starts, in which order), TLS (the
certificate's names, which service serves clients), metrics (each one's port on one machine), request
limits (the gRPC services each process runs), the doctor, the gateway's backends, the endpoints'
default ports (config.settings.Endpoints), the chart's values schema and the perf tools (which process
serves what). OTHER_PARTS are the servers the one-machine launcher runs beside them.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


@dataclass(frozen=True)
class Service:
    name: str               # `hybridsearch serve <name>`; Endpoints.<name>_port / <name>_addr; TLS name; metrics server
    main: str               # the module whose main() serves it
    grpc: tuple[str, ...]   # the gRPC services it answers (hybridsearch.v1.<grpc>)
    port: int               # its default gRPC port (Endpoints.<name>_port)
    metrics_offset: int     # on one machine it serves /metrics on settings.metrics_port + this
    public: bool = False    # serves clients: TLS without client certificates unless tls.gateway_client_auth
    store: bool = False     # keeps the collections' data (a StatefulSet on Kubernetes; started first)
    # stateless, its code may run inside the gateway instead of a process of its own (topology.in_gateway)
    colocatable: bool = False


SERVICES: tuple[Service, ...] = (
    Service("gateway", "hybridsearch.gateway.service", ("SearchService", "IngestService", "CollectionService", "SnapshotService", "AliasService"), 50051, 0, public=True),
    Service("bm25", "hybridsearch.bm25.service", ("Bm25Service",), 50052, 1, store=True),
    Service("vector", "hybridsearch.vector.service", ("VectorService",), 50053, 2, store=True),
    Service("expansion", "hybridsearch.expansion.service", ("ExpansionService",), 50054, 3, colocatable=True),
    Service("fusion", "hybridsearch.fusion.service", ("FusionService",), 50055, 4, colocatable=True),
)
NAMES: tuple[str, ...] = tuple(s.name for s in SERVICES)
PUBLIC: tuple[str, ...] = tuple(s.name for s in SERVICES if s.public)
INTERNAL: tuple[str, ...] = tuple(s.name for s in SERVICES if not s.public)  # what the gateway dials


class StoreName(str, Enum):
    """A store service's name as an enum member; the members are the table's rows marked `store` (Store below)."""

    @property
    def other(self) -> StoreName:
        """The other store: what one holds, reconcile copies to the other."""
        (other,) = (s for s in type(self) if s is not self)
        return other


# The store services (Store.BM25, Store.VECTOR): what every write goes to, in the table's order.
Store = StoreName("Store", {s.name.upper(): s.name for s in SERVICES if s.store})
STORES: tuple[str, ...] = tuple(s.value for s in Store)
BY_NAME: dict[str, Service] = {s.name: s for s in SERVICES}
COLOCATABLE: tuple[str, ...] = tuple(s.name for s in SERVICES if s.colocatable)
# Start order on one machine: the stores first, then what depends on them, the public gateway last.
START_ORDER: tuple[str, ...] = (*(s.name for s in SERVICES if s.store),
                                *(s.name for s in SERVICES if not s.store and not s.public), *PUBLIC)
# The servers the one-machine launcher runs beside the services (not `hybridsearch serve`): the state
# Redis, the cache Redis, the reranker's inference server, the LLM server for THOROUGH expansion.
OTHER_PARTS: tuple[str, ...] = ("redis", "redis-cache", "triton", "llm")
