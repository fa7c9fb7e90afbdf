"""The test tree itself: pytest imports test modules by basename (rootdir import mode, no __init__.py in the
test folders), so two test files of one name in different folders make the second fail to collect, and the
whole run with it."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def test_no_two_test_modules_share_a_basename():
    folders = defaultdict(list)
    for path in TESTS.rglob("test_*.py"):
        folders[path.name].append(str(path.parent.relative_to(TESTS)))
    assert {name: where for name, where in folders.items() if len(where) > 1} == {}
