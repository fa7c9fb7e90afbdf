"""`hybridsearch shell` in a real terminal: tmux runs it against a real stack, the test types into it
(send-keys) and reads the screen (capture-pane). tmux is a prerequisite of `make test`
(scripts/system-packages.sh installs it); without it this test fails, it does not skip."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.stack
QUERY = "how are ranked lists fused"
SKIPPED_ENV = {"TERM", "TMUX", "TMUX_PANE", "COLUMNS", "LINES"}  # the pane's own


class Screen:
    """One tmux server of this test's own (its socket), one pane running the shell."""

    def __init__(self, tmux: str, socket: str) -> None:
        self.tmux, self.socket = tmux, socket

    def run(self, *args: str) -> str:
        return subprocess.run([self.tmux, "-L", self.socket, "-f", "/dev/null", *args],
                              capture_output=True, text=True, check=True, timeout=30).stdout

    def text(self) -> str:
        """The pane's screen and scrollback, wrapped lines joined."""
        return self.run("capture-pane", "-p", "-J", "-S", "-", "-t", "shell")

    def wait_for(self, pattern: str, timeout: float = 90.0) -> re.Match:
        deadline = time.monotonic() + timeout
        while True:
            text = self.text()
            if found := re.search(pattern, text, re.MULTILINE):
                return found
            if time.monotonic() > deadline:
                raise AssertionError(f"{pattern!r} never showed; the screen:\n{text}")
            time.sleep(0.2)

    def type(self, line: str, enter: bool = True) -> None:
        self.run("send-keys", "-t", "shell", "-l", line)
        if enter:
            self.run("send-keys", "-t", "shell", "Enter")

    def key(self, name: str) -> None:
        self.run("send-keys", "-t", "shell", name)

    def dead(self) -> bool:
        return self.run("list-panes", "-t", "shell", "-F", "#{pane_dead}").strip() == "1"


@pytest.fixture
def screen(stack, corpus, tmp_path):
    tmux = shutil.which("tmux")
    if tmux is None:
        pytest.fail("tmux is not installed: `make test` installs it (scripts/system-packages.sh tmux), "
                    "or apt-get install -y tmux")
    env = {k: v for k, v in stack.test_env.items() if k not in SKIPPED_ENV and re.fullmatch(r"[A-Za-z_]\w*", k)}
    script = tmp_path / "shell.sh"
    script.write_text("".join(f"export {k}={shlex.quote(v)}\n" for k, v in env.items())
                      + f"exec {shlex.quote(sys.executable)} -m hybridsearch.cli shell -c {corpus.name} -n 3 "
                        "--effort fast\n")
    screen = Screen(tmux, f"hs-shell-test-{os.getpid()}")
    screen.run("new-session", "-d", "-s", "shell", "-x", "110", "-y", "45", "sh", str(script),
               ";", "set-option", "-t", "shell", "remain-on-exit", "on")
    try:
        yield screen
    finally:
        subprocess.run([tmux, "-L", screen.socket, "kill-server"], capture_output=True, timeout=30)


def test_the_shell_on_a_terminal(screen, stack, corpus):
    prompt = rf"^{corpus.name} \[hybrid/fast\]>"  # capture-pane drops the trailing space
    screen.wait_for(prompt)
    screen.type(QUERY)
    screen.wait_for(r"^ *rank +score +collection +type +where +preview")
    screen.wait_for(r"^ +3 0\.\d{3} cli-shell +md +\S+\.md:\d+-\d+ ")  # the hit's citation: path:lines
    screen.wait_for(r"^more: :next")

    screen.type(":next")  # page 2 numbers on: 4, 5, 6
    screen.wait_for(r"^ +4 0\.\d{3} cli-shell ")
    screen.wait_for(r"^ +6 0\.\d{3} cli-shell ")

    screen.type(":effort balanced")
    screen.wait_for(r"^effort: balanced")
    screen.wait_for(rf"^{corpus.name} \[hybrid/balanced\]>")
    screen.type(":filter parity=odd")
    screen.wait_for(r"^filters: parity=odd")

    screen.type(":open 5")  # the whole document, through GetDocuments: its title and path, then its text
    screen.wait_for(r"^\S.*  \(\S+\.md\)$")
    screen.wait_for(r"path=\S+\.md")
    screen.type(":open 1")
    screen.wait_for(r"hit 1 is not on this page \(hits 4-6\)")
    screen.type(":collections")  # ListCollections: the collections the key may read, with their counts
    screen.wait_for(r"^ *name +documents +chunks +language")
    screen.wait_for(r"^ *cli-shell +\d+ +\d+ ")
    screen.type(":explain")
    screen.wait_for(r"^bm25: ok")
    screen.wait_for(r"^fusion: method (zscore|rrf|linear|dbsf)")
    screen.type(":help")
    screen.wait_for(r"^ *:open N +the whole document of hit N")
    screen.type(":nonsense")
    screen.wait_for(r"^unknown command :nonsense; :help lists them")

    screen.key("Up")  # history: the last line comes back on the prompt
    screen.wait_for(rf"^{corpus.name} \[hybrid/balanced\]> :nonsense$")
    screen.key("C-u")
    screen.type(":quit")
    screen.wait_for(r"^bye")
    deadline = time.monotonic() + 15
    while not screen.dead() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert screen.dead()

    history = Path(stack.test_env["HYBRIDSEARCH_DATA_DIR"]) / "shell" / "history"
    typed = [line.removeprefix("+") for line in history.read_text().splitlines() if line.startswith("+")]
    assert typed[:3] == [QUERY, ":next", ":effort balanced"] and typed[-1] == ":quit"
