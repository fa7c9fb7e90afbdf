"""What a BM25-only answer would cost with BM25 read inside the gateway's process (session 22, an experiment, not
the product): a second gateway on 50151 whose `backends.bm25` is the BM25 service's own servicer called in process
(runtime/in_process.py) over a copy of the bench data dir's tantivy folder (the running BM25 service holds the
original's writer), every other part the running stack's. Compare it with two-gateways.py's driver, gateway B
being this one:
    cp -r $HYBRIDSEARCH_DATA_DIR/bm25-tantivy /tmp/bmcopy/
    HYBRIDSEARCH_ENDPOINTS__GATEWAY_PORT=50151 HYBRIDSEARCH_METRICS_PORT=0 \\
      .venv/bin/python docs/perf/session-s38/experiments/bm25-in-gateway.py /tmp/bmcopy &"""

import asyncio
import sys
from pathlib import Path

from hybridsearch.bm25.service import Bm25Servicer, build_engine
from hybridsearch.config.settings import get_settings
from hybridsearch.gateway import backends as backends_module
from hybridsearch.gateway import service
from hybridsearch.runtime.in_process import InProcessMethod


class InProcessBm25:
    """Bm25ServiceStub's unary methods, answered by the servicer in this process."""

    def __init__(self, servicer: Bm25Servicer) -> None:
        self.servicer = servicer

    def __getattr__(self, name: str) -> InProcessMethod:
        return InProcessMethod(getattr(self.servicer, name))


copy = Path(sys.argv[1])
settings = get_settings()
engine = build_engine(settings.model_copy(update={"data_dir": copy}))
connect = backends_module.Backends.connect


def connect_here(settings, dial=None):
    made = connect(settings, dial)
    made.bm25 = InProcessBm25(Bm25Servicer(engine))
    return made


backends_module.Backends.connect = classmethod(lambda cls, settings, dial=None: connect_here(settings, dial))
service.Backends = backends_module.Backends
asyncio.run(service.main())
