"""scripts/system-packages.sh, the Makefile's installer of what pip and npm cannot bring: a present command is
left alone, an unknown one is refused, and where it cannot install (not root, no sudo) it names the command to
type instead of failing somewhere later. (Its apt-get path is exercised by `make test` on a fresh machine.)"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "system-packages.sh"


def run(*needs: str, path: str | None = None, user: int | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, **({"PATH": path} if path else {})}
    command = ["/bin/bash", str(SCRIPT), *needs]
    if user is not None:
        command = [shutil.which("setpriv"), f"--reuid={user}", f"--regid={user}", "--clear-groups", *command]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)


def test_present_commands_install_nothing():
    present = [c for c in ("curl", "openssl", "unshare") if shutil.which(c)]
    result = run(*present)
    assert result.returncode == 0 and result.stderr == ""


def test_an_unknown_command_is_refused():
    result = run("no-such-tool")
    assert result.returncode == 2 and "no package known for 'no-such-tool'" in result.stderr


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root to drop to another user")
def test_without_root_or_sudo_it_names_the_command_to_type():
    # An empty PATH: every command it checks for is missing, and there is no sudo; each package is named
    # once, in the order asked.
    result = run("tmux", "g++", "prometheus", "tmux", path="/nonexistent", user=65534)
    assert result.returncode == 1, result.stderr
    assert "missing tmux build-essential prometheus;" in result.stderr
    assert "sudo apt-get install -y tmux build-essential prometheus" in result.stderr
