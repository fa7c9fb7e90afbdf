"""The documented client examples (examples/, docs/client.md) run against the real stack and print what
they promise."""

from __future__ import annotations

import subprocess
import sys

import pytest
from stacks import REPO, client_environment

pytestmark = pytest.mark.stack


def run_example(stack, name: str) -> str:
    import os

    with client_environment(stack):
        env = dict(os.environ)
    result = subprocess.run([sys.executable, str(REPO / "examples" / name), stack.settings.endpoints.addr("gateway")],
                            env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_sync_example(stack):
    out = run_example(stack, "client_sync.py")
    lines = out.splitlines()
    assert lines[0] in ("written 2, unchanged 0", "written 0, unchanged 2")
    ranked = [line for line in lines if line.startswith(("0.", "1."))]
    assert ranked and all("draft" not in line for line in ranked)  # the Not filter held
    assert any(line.startswith("bm25: ok") for line in lines)
    assert any(line.startswith("refused: INVALID_ARGUMENT: top_k must be 1-100") for line in lines)
    assert lines[-1] == "deleted 1"


def test_async_example(stack):
    out = run_example(stack, "client_async.py")
    assert "vector search -> ['doc-0'" in out and "bm25 -> ['doc-1'" in out
    assert "documents: bm25 4, vector 4" in out
