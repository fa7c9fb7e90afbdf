"""scripts/system-packages.sh, the Makefile's installer of what pip and npm cannot bring: a present command is
left alone, an unknown one is refused, and where it cannot install (not root, no sudo) it names the command to
type instead of failing somewhere later. (Its apt-get path is exercised by `make test` on a fresh machine.)"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "system-packages.sh"


def run(*needs: str, path: str | None = None, user: int | None = None, copy_to: Path | None = None
        ) -> subprocess.CompletedProcess:
    """The script run (as `user`: from a copy in `copy_to`, a folder that user can read: the checkout may sit
    in a home folder of mode 0700, Debian's default, which another user cannot enter)."""
    env = {**os.environ, **({"PATH": path} if path else {})}
    script = SCRIPT
    if copy_to is not None:
        copy_to.chmod(0o755)
        script = Path(shutil.copy(SCRIPT, copy_to / SCRIPT.name))
        script.chmod(0o755)
    command = ["/bin/bash", str(script), *needs]
    if user is not None:
        command = [shutil.which("setpriv"), f"--reuid={user}", f"--regid={user}", "--clear-groups", *command]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=60, cwd=copy_to)


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
    # once, in the order asked. Run by nobody, from a copy nobody can read wherever the checkout is.
    folder = Path(tempfile.mkdtemp(prefix="system-packages-", dir="/tmp"))
    try:
        result = run("tmux", "g++", "prometheus", "tmux", path="/nonexistent", user=65534, copy_to=folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    assert result.returncode == 1, result.stderr
    assert "missing tmux build-essential prometheus;" in result.stderr
    assert "sudo apt-get install -y tmux build-essential prometheus" in result.stderr
