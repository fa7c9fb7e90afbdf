"""The README's commands run as written on a machine `make install` set up: each line of its bash blocks
names a Makefile target, or an executable the install puts in the venv's bin folder (`.venv/bin/X`), or a
program on PATH. The quick start's grpcurl line once said plain `grpcurl`, which only `.venv/bin` holds;
tests/gateway/test_stack.py runs that same `.venv/bin/grpcurl` against a real gateway."""

from __future__ import annotations

import re
import shlex
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
TARGETS = set(re.findall(r"^([\w.-]+):", (ROOT / "Makefile").read_text(), re.MULTILINE))
VENV_BIN = Path(sys.prefix) / "bin"  # the venv this suite runs in: `.venv` after `make install`


def commands() -> list[list[str]]:
    """Each command line of the README's bash blocks, split as the shell would, its VAR=value prefixes dropped."""
    lines = []
    for block in re.findall(r"```bash\n(.*?)```", README, re.DOTALL):
        for line in block.splitlines():
            words = shlex.split(line, comments=True)
            while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", words[0]):
                words.pop(0)
            if words:
                lines.append(words)
    return lines


def test_the_readme_has_its_commands():
    programs = [words[0] for words in commands()]
    assert "make" in programs and ".venv/bin/hybridsearch" in programs and ".venv/bin/grpcurl" in programs


def test_every_readme_command_names_something_the_install_provides():
    missing = []
    for words in commands():
        program = words[0]
        if program == "make":
            if len(words) > 1 and words[1] not in TARGETS:
                missing.append(f"make target {words[1]}")
        elif program.startswith(".venv/bin/"):
            if not (VENV_BIN / program.removeprefix(".venv/bin/")).is_file():
                missing.append(f"{program} (not in {VENV_BIN})")
        elif shutil.which(program) is None:
            missing.append(f"{program} (not on PATH: write .venv/bin/{program} if the install brings it)")
    assert not missing, missing
