"""py-spy flame graphs of the stack's Python services while a load run answers (`hybridsearch loadtest
closed --profile DIR`): per process, py-spy's collapsed stacks (`NAME.collapsed`, the data perf.budget
folds into stages) and an SVG flame graph drawn from them (`NAME.svg`), and `profile.json` with what
the folding needs (the sampling rate, each process's CPU over the sampling window).

py-spy samples without pausing the services (--nonblocking), and only the threads it takes for active
(idle ones are left out), so a process's samples over the rate approximate its CPU time; threads without
Python frames (gRPC core's own) are not sampled, and runnable threads waiting for a core are: profile.json
keeps each process's CPU over the window beside the samples (perf.budget compares them).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from xml.sax.saxutils import escape

from hybridsearch.tools.perf.procs import SERVICES, cpu_ns_of

PROFILE_NAME = "profile.json"
COLLAPSED = ".collapsed"
INSTALL_HINT = ("py-spy was not found. Install it (PyPI), into any virtual environment: "
                "python3 -m venv /tmp/pyspy && /tmp/pyspy/bin/pip install py-spy, then pass --py-spy "
                "/tmp/pyspy/bin/py-spy. It needs ptrace rights over the services: the same user with "
                "kernel.yama.ptrace_scope 0, or root (CAP_SYS_PTRACE in a container).")
ATTACH_S = 0.5  # py-spy's first samples come this long after it starts


def find_py_spy(given: str | None = None) -> str:
    """`given`, else py-spy on PATH, else beside this Python; FileNotFoundError with the install hint."""
    for candidate in (given, shutil.which("py-spy"), str(Path(sys.executable).with_name("py-spy"))):
        if candidate and Path(candidate).is_file():
            return candidate
    raise FileNotFoundError(INSTALL_HINT)


@dataclass
class ProfileSpec:
    folder: Path
    py_spy: str
    rate: int = 100  # samples a second


@dataclass
class Profilers:
    """One `py-spy record` per Python service of `pids` (Redis, Triton and the LLM are not Python) from
    `__enter__` to `__exit__`; then the SVGs and profile.json."""

    spec: ProfileSpec
    pids: dict[str, int]
    running: dict[str, subprocess.Popen] = field(default_factory=dict)
    record: dict = field(default_factory=dict)
    started: float = 0.0
    cpu_before: dict[str, int] = field(default_factory=dict)

    def __enter__(self) -> Profilers:
        self.spec.folder.mkdir(parents=True, exist_ok=True)
        for name, pid in self.pids.items():
            if name in SERVICES:
                log = (self.spec.folder / f"{name}.py-spy.log").open("wb")
                self.running[name] = subprocess.Popen(
                    [self.spec.py_spy, "record", "--pid", str(pid), "--rate", str(self.spec.rate), "--nonblocking",
                     "--format", "raw", "--output", str(self.spec.folder / f"{name}{COLLAPSED}")],
                    stdout=log, stderr=subprocess.STDOUT)
                log.close()
        time.sleep(ATTACH_S)
        self.started, self.cpu_before = time.monotonic(), cpu_ns_of({n: self.pids[n] for n in self.running})
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        cpu_after, window_s = cpu_ns_of({n: self.pids[n] for n in self.running}), time.monotonic() - self.started
        for process in self.running.values():
            process.send_signal(signal.SIGINT)  # py-spy writes its file on Ctrl-C
        failed = {}
        for name, process in self.running.items():
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            collapsed = self.spec.folder / f"{name}{COLLAPSED}"
            if collapsed.is_file():
                stacks = read_collapsed(collapsed.read_text())
                (self.spec.folder / f"{name}.svg").write_text(render_svg(stacks, f"{name}: py-spy, {self.spec.rate}/s"))
            else:
                failed[name] = (self.spec.folder / f"{name}.py-spy.log").read_text(errors="replace")[-500:]
        self.record = {"rate": self.spec.rate, "window_s": round(window_s, 3), "pids": self.pids,
                       "processes": sorted(set(self.running) - set(failed)), "failed": failed,
                       "cpu_ms_in_window": {n: round((cpu_after[n] - self.cpu_before[n]) / 1e6, 3)
                                            for n in self.cpu_before if n in cpu_after}}

    def write(self, cpu_ms_per_answer: dict[str, float], answers: int, run: str) -> Path:
        """profile.json: the sampling record, and the run's CPU per answer that the shares are scaled to."""
        path = self.spec.folder / PROFILE_NAME
        path.write_text(json.dumps({**self.record, "run": run, "answers": answers,
                                    "cpu_ms_per_answer": cpu_ms_per_answer}, indent=1))
        return path


def read_collapsed(text: str) -> Counter[tuple[str, ...]]:
    """py-spy's raw output (`frame;frame;... count` a line, root first) as stack -> samples."""
    stacks: Counter[tuple[str, ...]] = Counter()
    for line in text.splitlines():
        stack, _, count = line.rstrip().rpartition(" ")
        if stack and count.isdigit():
            stacks[tuple(stack.split(";"))] += int(count)
    return stacks


# An SVG flame graph: root at the bottom, a frame as wide as its samples, its name and share on hover.
WIDTH, ROW, TOP, CHAR_PX, MIN_PX = 1200.0, 16.0, 24.0, 6.5, 0.3


def render_svg(stacks: Counter[tuple[str, ...]], title: str) -> str:
    """The flame graph of collapsed stacks as one SVG file (no script: hover shows a frame's name and share)."""
    total = sum(stacks.values())
    tree: dict = {}
    for stack, count in stacks.items():  # a nested dict per frame; "" holds the samples under it
        node = tree
        for frame in stack:
            node = node.setdefault(frame, {"": 0})
            node[""] += count
    depth = max((len(s) for s in stacks), default=0)
    height = TOP + (depth + 1) * ROW
    scale = WIDTH / max(total, 1)
    boxes: list[str] = []

    def draw(node: dict, x: float, level: int) -> None:
        for frame, child in sorted((k, v) for k, v in node.items() if k):
            width = child[""] * scale
            if width >= MIN_PX:
                boxes.append(_box(frame, child[""], total, x, height - (level + 1) * ROW, width))
                draw(child, x, level + 1)
            x += width

    draw(tree, 0.0, 0)
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH:.0f}" height="{height:.0f}" '
            f'font-family="monospace" font-size="11">'
            f'<text x="4" y="16" font-size="13">{escape(title)}: {total} samples</text>{"".join(boxes)}</svg>\n')


def _box(frame: str, samples: int, total: int, x: float, y: float, width: float) -> str:
    """One frame: its rectangle, its name cut to the width, and on hover its full name and share."""
    fits = int((width - 4) / CHAR_PX)
    label = frame if len(frame) <= fits else frame[: max(0, fits - 2)] + ".."
    text = f'<text x="{x + 2:.2f}" y="{y + ROW - 4:.1f}">{escape(label)}</text>' if len(label) > 2 else ""
    return (f'<g><title>{escape(frame)} ({samples} samples, {100 * samples / total:.2f}%)</title>'
            f'<rect x="{x:.2f}" y="{y:.1f}" width="{width:.2f}" height="{ROW - 1}" fill="{_colour(frame)}"/>{text}</g>')


def _colour(frame: str) -> str:
    """A warm colour that a frame's name always gets (flamegraph.pl's "hot" palette)."""
    h = hashlib.blake2b(frame.encode(), digest_size=3).digest()
    return f"rgb({205 + h[0] % 50},{h[1] % 230},{h[2] % 55})"
