"""docs/architecture.md stays true: every module and folder it names exists (a moved module fails here, naming the
page's line), and every package under services/ is on its map."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PAGE = REPO / "docs" / "architecture.md"
NAMED = re.compile(r"`(services/[\w/]+(?:\.py|/))`")


def test_every_path_the_page_names_exists():
    missing = [f"docs/architecture.md:{n}: {path}" for n, line in enumerate(PAGE.read_text().splitlines(), 1)
               for path in NAMED.findall(line) if not (REPO / path).exists()]
    assert missing == []


def test_every_package_is_on_the_map():
    named = {path.rstrip("/") for path in NAMED.findall(PAGE.read_text())}
    packages = {str(p.parent.relative_to(REPO)) for p in (REPO / "services").glob("*/__init__.py")} - {"services/v1"}
    assert packages - named == set()


def test_the_page_names_the_stages_in_the_order_search_runs_them():
    """search.py's docstring table is the order its servicer runs the stages in; the page follows it."""
    table = re.findall(r"^  \w+ +gateway\.(\w+)\.(\w+) ", (REPO / "services/gateway/query/search.py").read_text(), re.M)
    assert len(table) == 8, table
    page = PAGE.read_text().split("## The path of a search")[1]
    where = [page.index(f"`services/gateway/{room}/{module}.py`") for room, module in table]
    assert where == sorted(where), table


# Folders of tests/ that test no one package: the whole system, the deployment, the contract, the data.
NOT_A_PACKAGE = {
    "faults": "kills and network faults across every service",
    "quality": "the quality gate over ../shared/datasets",
    "charts": "the Helm chart", "cluster": "the chart on a real Kubernetes API server",
    "protos": "the wire contract (protos/)", "samples": "the sample corpus (samples/)",
    "scripts": "scripts/", "data": "test data, no tests",
}


def test_the_tests_mirror_the_packages():
    """Each folder of tests/ holding tests is a package of services/ at the same place (tests/gateway/query/legs
    tests services/gateway/query/legs), or one of NOT_A_PACKAGE's, so a module's tests are where it is."""
    folders = {p.parent.relative_to(REPO / "tests") for p in (REPO / "tests").rglob("test_*.py")} - {Path(".")}
    astray = sorted(str(f) for f in folders
                    if f.parts[0] not in NOT_A_PACKAGE and not (REPO / "services" / f / "__init__.py").exists())
    assert astray == []


def test_no_module_is_over_400_lines():
    """One job a module (issue 34): none of services/ over 400 lines, the generated stubs (services/v1) aside."""
    long = {str(p.relative_to(REPO)): n for p in (REPO / "services").rglob("*.py")
            if "v1" not in p.relative_to(REPO / "services").parts[:1] and (n := len(p.read_text().splitlines())) > 400}
    assert long == {}


def test_the_gateway_keeps_its_rooms():
    """At most 15 modules directly in services/gateway: the rest in its rooms (query, access, resources, ingest)."""
    assert len(list((REPO / "services" / "gateway").glob("*.py"))) <= 15
