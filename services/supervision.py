"""Process supervision for `serve all`: supervisord (a kept library) runs every part of the stack.

The launcher declares programs and starts them in order; supervisord restarts one that dies as
Kubernetes restarts a pod: at once when a running process crashes (kill -9, OOM), then, while it keeps
dying within START_SECONDS of a start, after a backoff that grows by a second per attempt, up to
START_RETRIES attempts (about 3.5 minutes) before giving up (FATAL, in the log). A stop asked for by the
launcher (`stop`) is an operator's stop: the program stays down until started again.

supervisord runs in the foreground as the launcher's child, with its control socket (XML-RPC over a
Unix socket) in the data dir. Each program is its own process group, so a stop or a kill reaches the
processes it spawned too (Triton's Python backend stubs).
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import xmlrpc.client
from dataclasses import dataclass, field
from pathlib import Path

from supervisor.xmlrpc import SupervisorTransport

START_SECONDS = 2
START_RETRIES = 20
STOP_WAIT_SECONDS = 15
# States in which a program will not come up again by itself.
DEAD_STATES = frozenset({"FATAL", "EXITED", "STOPPED", "UNKNOWN"})
MAX_SOCKET_PATH = 100  # sun_path is 108 bytes


@dataclass(frozen=True)
class Program:
    name: str
    command: list[str]
    # Only what differs from supervisord's own environment (which the children inherit).
    env: dict[str, str] = field(default_factory=dict)


def die_with_parent(cmd: list[str]) -> list[str]:
    """Wraps a child's command so Linux sends it SIGTERM when the launcher dies, even by SIGKILL.

    setpriv (util-linux) sets PR_SET_PDEATHSIG and execs; a preexec_fn could do the same, but
    forking with a preexec_fn deadlocks in a process that runs gRPC threads.
    """
    setpriv = shutil.which("setpriv")
    return [setpriv, "--pdeathsig", "TERM", "--", *cmd] if setpriv else cmd


def _escaped(value: str) -> str:
    """supervisord's config interpolates %(...)s: a literal % is written %%."""
    return value.replace("%", "%%")


def program_section(program: Program, log_file: Path) -> str:
    lines = [
        f"[program:{program.name}]",
        f"command={_escaped(shlex.join(program.command))}",
        "autostart=false",
        "autorestart=unexpected",
        "exitcodes=0",
        f"startsecs={START_SECONDS}",
        f"startretries={START_RETRIES}",
        "stopsignal=TERM",
        f"stopwaitsecs={STOP_WAIT_SECONDS}",
        "stopasgroup=true",
        "killasgroup=true",
        "redirect_stderr=true",
        f"stdout_logfile={_escaped(str(log_file))}",
        "stdout_logfile_maxbytes=50MB",
        "stdout_logfile_backups=2",
    ]
    if program.env:
        pairs = []
        for key, value in program.env.items():
            if '"' in value or "\n" in value:
                raise ValueError(f"{program.name}: environment value of {key} holds a quote or newline")
            pairs.append(f'{key}="{_escaped(value)}"')
        lines.append("environment=" + ",".join(pairs))
    return "\n".join(lines) + "\n"


class Supervisor:
    """supervisord as a child process, and a client of its control socket."""

    def __init__(self, data_dir: Path, log_dir: Path, env: dict[str, str]) -> None:
        self.dir = (data_dir / "supervisor").resolve()
        self.dir.mkdir(parents=True, exist_ok=True)
        self.log_dir = log_dir.resolve()
        self.env = env
        self.programs: dict[str, Program] = {}
        socket = self.dir / "supervisord.sock"
        if len(str(socket)) > MAX_SOCKET_PATH:
            socket = Path(tempfile.mkdtemp(prefix="hs-supervisor-")) / "supervisord.sock"
        self.socket = socket
        self.conf = self.dir / "supervisord.conf"
        self.process: subprocess.Popen | None = None

    def _config(self) -> str:
        head = "\n".join([
            "[supervisord]",
            "nodaemon=true",
            f"logfile={_escaped(str(self.log_dir / 'supervisord.log'))}",
            f"pidfile={_escaped(str(self.dir / 'supervisord.pid'))}",
            f"childlogdir={_escaped(str(self.log_dir))}",
            "loglevel=info",
            "[unix_http_server]",
            f"file={_escaped(str(self.socket))}",
            "chmod=0700",
            "[rpcinterface:supervisor]",
            "supervisor.rpcinterface_factory = supervisor.rpcinterface:make_main_rpcinterface",
        ]) + "\n"
        return head + "".join(program_section(p, self.log_dir / f"{p.name}.log") for p in self.programs.values())

    @property
    def rpc(self):
        """A fresh client per call: a transport whose request failed cannot send the next one."""
        transport = SupervisorTransport(None, None, f"unix://{self.socket}")
        return xmlrpc.client.ServerProxy("http://127.0.0.1", transport=transport)

    def add(self, program: Program) -> None:
        """Declares a program: written to the config, then read by supervisord (started if need be)."""
        self.programs[program.name] = program
        self.conf.write_text(self._config())
        if self.process is None:
            self._launch()
        else:
            self.rpc.supervisor.reloadConfig()
            self.rpc.supervisor.addProcessGroup(program.name)

    def _answering_pid(self) -> int | None:
        """The pid of the supervisord answering on the control socket, None when none does."""
        try:
            return self.rpc.supervisor.getPID()
        except (OSError, xmlrpc.client.Fault):
            return None

    def _launch(self) -> None:
        if (running := self._answering_pid()) is not None:
            # Another stack on this data dir: starting beside it would drive (and on failure stop) its parts.
            raise RuntimeError(f"a stack already runs from {self.dir.parent} (supervisord pid {running}, "
                               f"{self.socket}): stop it first, or give this one another HYBRIDSEARCH_DATA_DIR")
        self.process = subprocess.Popen(
            die_with_parent([sys.executable, "-m", "supervisor.supervisord", "-n", "-c", str(self.conf)]),
            stdout=open(self.log_dir / "supervisord.out", "ab"), stderr=subprocess.STDOUT,
            env=self.env, start_new_session=True,
        )
        end = time.monotonic() + 15
        while time.monotonic() < end:
            if self.process.poll() is not None:
                raise RuntimeError(f"supervisord exited with {self.process.returncode}; see {self.log_dir}")
            try:
                if self._answering_pid() == self.process.pid and self.rpc.supervisor.getState()["statename"] == "RUNNING":
                    return
            except (OSError, xmlrpc.client.Fault):
                pass
            time.sleep(0.1)
        raise RuntimeError(f"supervisord did not answer on {self.socket}")

    def info(self, name: str) -> dict:
        return self.rpc.supervisor.getProcessInfo(name)

    def state(self, name: str) -> str:
        return self.info(name)["statename"]

    def pid(self, name: str) -> int:
        pid = self.info(name)["pid"]
        if not pid:
            raise ProcessLookupError(f"{name} is not running ({self.state(name)})")
        return pid

    def start(self, name: str) -> None:
        if self.state(name) not in ("RUNNING", "STARTING", "BACKOFF"):
            self.rpc.supervisor.startProcess(name, False)

    def stop(self, name: str) -> None:
        if self.state(name) in ("RUNNING", "STARTING", "BACKOFF"):
            self.rpc.supervisor.stopProcess(name, True)

    def shutdown(self) -> None:
        """Stops every program (last declared first) and supervisord itself."""
        if self.process is None:
            return
        try:
            for name in reversed(list(self.programs)):
                self.stop(name)
        except (OSError, xmlrpc.client.Fault):
            pass
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=STOP_WAIT_SECONDS + 10)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self.process = None
