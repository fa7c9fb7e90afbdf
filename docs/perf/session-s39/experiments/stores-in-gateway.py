"""What answers would cost with both stores read inside the gateway's process (session 23, an experiment, not the
product): a second gateway on 50151 whose `backends.bm25` and `backends.vector` are the BM25 and vector services' own
servicers called in process (runtime/in_process.py), over a copy of the bench data dir's two store folders (the
running services hold the originals' writers), every other part the running stack's. Driven by
stores-in-gateway-drive.py:
    mkdir /tmp/storecopy && cp -r $HYBRIDSEARCH_DATA_DIR/{bm25-tantivy,qdrant-edge,cache} /tmp/storecopy/
    HYBRIDSEARCH_ENDPOINTS__GATEWAY_PORT=50151 HYBRIDSEARCH_METRICS_PORT=0 \\
      .venv/bin/python docs/perf/session-s39/experiments/stores-in-gateway.py /tmp/storecopy &"""

import asyncio
import sys
from pathlib import Path

from hybridsearch.bm25.service import Bm25Servicer, build_engine
from hybridsearch.config.settings import get_settings
from hybridsearch.gateway import backends as backends_module
from hybridsearch.gateway import service
from hybridsearch.runtime.in_process import InProcessMethod
from hybridsearch.vector.dense import VectorEngine
from hybridsearch.vector.service import VectorServicer


class InProcess:
    """A stub's unary methods, answered by the servicer in this process."""

    def __init__(self, servicer) -> None:
        self.servicer = servicer

    def __getattr__(self, name: str) -> InProcessMethod:
        return InProcessMethod(getattr(self.servicer, name))


copy = Path(sys.argv[1])
settings = get_settings()
here = settings.model_copy(update={"data_dir": copy})
bm25 = InProcess(Bm25Servicer(build_engine(here)))
vector = InProcess(VectorServicer(VectorEngine(here), bm25))
connect = backends_module.Backends.connect


def connect_here(settings, dial=None):
    made = connect(settings, dial)
    made.bm25, made.vector = bm25, vector
    return made


backends_module.Backends.connect = classmethod(lambda cls, settings, dial=None: connect_here(settings, dial))
service.Backends = backends_module.Backends
asyncio.run(service.main())
