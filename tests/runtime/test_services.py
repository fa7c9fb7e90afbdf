"""The service table (runtime.services): the one list of the five Python services. Each consumer's names are
the table's, and no other source spells the five names out as a list, tuple, set or dict."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest

from hybridsearch.contract import limits

from hybridsearch.runtime import metrics

from hybridsearch.runtime import services

from hybridsearch.security import tls
from hybridsearch.config.deployment import Endpoints
from hybridsearch.gateway.backends import Backends
from hybridsearch.launcher import SERVICES as STARTED
from hybridsearch.tools.faults.drill import NAMES_PART
from hybridsearch.tools.perf.procs import SERVICES as PROCESSES
from hybridsearch.v1 import aliases_pb2, bm25_pb2, collections_pb2, expansion_pb2, fusion_pb2, ingest_pb2, search_pb2, snapshots_pb2, vector_pb2

REPO = Path(__file__).resolve().parents[2]
SPELLED_OUT_ELSEWHERE: set[str] = set()  # every list of the five names reads the table


def test_the_rows_are_distinct():
    assert len(set(services.NAMES)) == len({s.port for s in services.SERVICES}) == len(services.SERVICES) == 5
    assert len({s.metrics_offset for s in services.SERVICES}) == len(services.SERVICES)
    assert services.PUBLIC == ("gateway",) and set(services.INTERNAL) == set(services.NAMES) - {"gateway"}


def test_every_row_names_a_module_and_grpc_services_that_exist():
    descriptors = [m.DESCRIPTOR for m in (bm25_pb2, collections_pb2, expansion_pb2, fusion_pb2, ingest_pb2, search_pb2,
                                                  snapshots_pb2, vector_pb2, aliases_pb2)]
    declared = {name for d in descriptors for name in d.services_by_name}
    for s in services.SERVICES:
        assert importlib.util.find_spec(s.main) is not None, s.main
        assert set(s.grpc) <= declared, s.grpc


def test_every_consumer_reads_the_table():
    assert set(STARTED) == set(services.NAMES) and STARTED[-1] == "gateway"
    assert STARTED[:2] == tuple(s.name for s in services.SERVICES if s.store)  # stores first
    assert tls.SERVICE_NAMES == services.NAMES and tls.PUBLIC_SERVICES == services.PUBLIC
    assert set(tls.LOCAL_DNS) >= set(services.NAMES)
    assert metrics.METRICS_PORT_OFFSETS == {s.name: s.metrics_offset for s in services.SERVICES}
    assert limits.SERVICES_OF == {s.name: s.grpc for s in services.SERVICES}
    assert PROCESSES == services.NAMES
    assert set(Backends.__dataclass_fields__) >= set(services.INTERNAL)
    assert set(NAMES_PART) == {*services.INTERNAL, *services.OTHER_PARTS}  # what the kill drill can kill


def test_the_endpoints_are_a_port_and_an_address_per_row():
    fields = set(Endpoints.model_fields) - {"host"}
    assert fields == {f"{name}_{kind}" for name in services.NAMES for kind in ("port", "addr")}
    endpoints = Endpoints()
    assert {name: endpoints.addr(name) for name in services.NAMES} == {
        s.name: f"127.0.0.1:{s.port}" for s in services.SERVICES}


def test_the_cli_serves_the_tables_modules():
    from hybridsearch.cli import SERVICE_MAINS

    assert SERVICE_MAINS == {s.name: s.main for s in services.SERVICES}


def spelled_out(path: Path) -> list[int]:
    """Lines of `path` where a list, tuple or set of string literals, or a dict's literal keys, hold all five names."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            items = node.elts
        elif isinstance(node, ast.Dict):
            items = node.keys
        else:
            continue
        strings = {item.value for item in items if isinstance(item, ast.Constant) and isinstance(item.value, str)}
        if set(services.NAMES) <= strings:
            lines.append(node.lineno)
    return lines


@pytest.mark.parametrize("folder", ["services", "tests", "charts/tools", "loadtest"])
def test_no_other_source_spells_the_five_names_out(folder):
    table = REPO / "services" / "runtime" / "services.py"
    found = {str(path.relative_to(REPO)): lines for path in sorted((REPO / folder).rglob("*.py"))
             if path != table and "v1" not in path.relative_to(REPO).parts and (lines := spelled_out(path))}
    assert set(found) <= SPELLED_OUT_ELSEWHERE, found


def test_the_stores_are_the_rows_marked_store_and_each_has_the_other():
    from hybridsearch.runtime.services import STORES, Store

    assert [s.value for s in Store] == [s.name for s in services.SERVICES if s.store] == list(STORES)
    assert Store.BM25 == "bm25" and Store.BM25.other is Store.VECTOR and Store.VECTOR.other is Store.BM25
