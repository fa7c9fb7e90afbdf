"""The gRPC contract's discipline: buf lint passes, buf breaking catches what would break a client
(a deliberately breaking change is shown failing), additions pass, and services/v1 is what protoc makes
of protos/ today (generated, never edited)."""

from __future__ import annotations

import filecmp
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PROTOS = REPO / "protos"
BUF = PROTOS / "tools" / "buf.sh"
SEARCH = "hybridsearch/v1/search.proto"


def buf(*args: str, cwd: Path = PROTOS) -> subprocess.CompletedProcess:
    return subprocess.run([str(BUF), *args], cwd=cwd, capture_output=True, text=True, timeout=300)


def test_lint_passes():
    result = buf("lint")
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.fixture
def contract(tmp_path) -> Path:
    """A git repository holding today's protos (the 'main' a change is checked against)."""
    work = tmp_path / "repo"
    shutil.copytree(PROTOS, work / "protos", ignore=shutil.ignore_patterns("tools"))
    git = ["git", "-c", "user.email=ci@localhost", "-c", "user.name=ci"]
    subprocess.run(["git", "init", "-q", str(work)], check=True)
    subprocess.run([*git, "-C", str(work), "add", "-A"], check=True)
    subprocess.run([*git, "-C", str(work), "commit", "-qm", "main"], check=True)
    return work


def breaking(work: Path) -> subprocess.CompletedProcess:
    return buf("breaking", "--against", f"{work / '.git'}#ref=HEAD,subdir=protos", cwd=work / "protos")


def edit(work: Path, old: str, new: str) -> None:
    path = work / "protos" / SEARCH
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new, 1))


@pytest.mark.parametrize("old, new, message", [
    ("  int32 offset = 10;", "  int64 offset = 10;", 'changed type from "int32" to "int64"'),
    ("  bool explain = 9;\n", "", 'Previously present field "9" with name "explain"'),
    ("  string snippet = 4;", "  string preview = 4;", 'changed name from "snippet" to "preview"'),
    ("  rpc Search(SearchRequest) returns (SearchResponse);", "", 'Previously present RPC "Search"'),
])
def test_a_breaking_change_fails(contract, old, new, message):
    edit(contract, old, new)
    result = breaking(contract)
    assert result.returncode != 0
    assert message in result.stdout, result.stdout + result.stderr


def test_an_added_field_passes(contract):
    edit(contract, "  bool explain = 9;", "  bool explain = 9;\n  string added_later = 99;")
    result = breaking(contract)
    assert result.returncode == 0, result.stdout + result.stderr


def test_generated_code_is_what_protoc_makes_of_the_protos(tmp_path):
    sources = sorted(str(p.relative_to(PROTOS)) for p in (PROTOS / "hybridsearch" / "v1").glob("*.proto"))
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{PROTOS}", f"--python_out={tmp_path}",
                    f"--grpc_python_out={tmp_path}", *sources], check=True)
    made = tmp_path / "hybridsearch" / "v1"
    names = sorted(p.name for p in made.glob("*.py"))
    assert names, "protoc generated nothing"
    match, mismatch, errors = filecmp.cmpfiles(made, REPO / "services" / "v1", names, shallow=False)
    assert not mismatch and not errors, f"services/v1 is stale: run `make protos` ({mismatch + errors})"
