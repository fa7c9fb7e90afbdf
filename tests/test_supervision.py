"""supervisord under `serve all` (hybridsearch.supervision): one stack per data dir."""

from __future__ import annotations

import os
import sys

import pytest

from hybridsearch.supervision import Program, Supervisor

SLEEPER = Program("sleeper", [sys.executable, "-c", "import time; time.sleep(120)"])


def test_a_second_stack_on_the_same_data_dir_is_refused_and_the_first_keeps_running(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    first = Supervisor(tmp_path, logs, dict(os.environ))
    try:
        first.add(SLEEPER)
        first.start("sleeper")
        pid = first.pid("sleeper")
        second = Supervisor(tmp_path, logs, dict(os.environ))
        with pytest.raises(RuntimeError, match="a stack already runs from"):
            second.add(Program("other", [sys.executable, "-c", "pass"]))
        second.shutdown()  # what the launcher does after a failed start: it must not reach the first's parts
        assert first.state("sleeper") in ("STARTING", "RUNNING") and first.pid("sleeper") == pid
    finally:
        first.shutdown()
