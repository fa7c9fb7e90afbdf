"""A user-space TCP proxy that makes network faults between two services on loopback.

This kernel has neither `tc netem` nor veth pairs, so faults are made between the processes: point a
service at the proxy (e.g. HYBRIDSEARCH_ENDPOINTS__BM25_ADDR=127.0.0.1:<proxy port>) and switch the
proxy's fault while traffic flows:

  PASS       forward both ways
  LATENCY    hold every chunk coming back from the upstream `latency_s` before passing it on (order
             kept, throughput not serialised): each call answers that much later
  BLACKHOLE  accept and read, never forward or answer (connections stay open: the caller's deadline
             is all that ends a call)
  RESET      reset every open connection (RST, not FIN) and every new one at once

The proxy runs its own event loop in a thread, so a synchronous test can drive it.
"""

from __future__ import annotations

import asyncio
import enum
import socket
import struct
import threading
import time
from dataclasses import dataclass

from hybridsearch.tools.perf.load.bounds import check_loopback

CHUNK = 64 * 1024


class Fault(enum.Enum):
    PASS = "pass"
    LATENCY = "latency"
    BLACKHOLE = "blackhole"
    RESET = "reset"


@dataclass(eq=False)  # hashed by identity: a set holds the open links
class _Link:
    client: asyncio.StreamWriter
    upstream: asyncio.StreamWriter | None = None


def _reset(writer: asyncio.StreamWriter) -> None:
    """Closes with RST: SO_LINGER on with a zero timeout."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
    writer.transport.abort()


class FaultProxy:
    def __init__(self, target: str, listen_host: str = "127.0.0.1", listen_port: int = 0) -> None:
        self.target_host, port = check_loopback(target).rsplit(":", 1)
        self.target_port = int(port)
        self.listen_host, self.listen_port = listen_host, listen_port
        self.fault, self.latency_s = Fault.PASS, 0.0
        self.links: set[_Link] = set()
        self.connections = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="fault-proxy", daemon=True)
        self._server: asyncio.AbstractServer | None = None

    @property
    def address(self) -> str:
        return f"{self.listen_host}:{self.listen_port}"

    def start(self) -> FaultProxy:
        self._thread.start()
        self._server = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._accept, self.listen_host, self.listen_port), self._loop).result(10)
        self.listen_port = self._server.sockets[0].getsockname()[1]
        return self

    def set(self, fault: Fault, latency_s: float = 0.0) -> None:
        """Switches the fault for every open and future connection."""
        def apply() -> None:
            # Bytes a black hole swallowed left its connections mid-frame: when the route comes back they
            # are dead (as a real network's would be after a long outage), and callers connect again.
            leaving_hole = self.fault is Fault.BLACKHOLE and fault is not Fault.BLACKHOLE
            self.fault, self.latency_s = fault, latency_s
            if fault is Fault.RESET or leaving_hole:
                for link in list(self.links):
                    self._drop(link)
        self._loop.call_soon_threadsafe(apply)
        time.sleep(0.01)

    def stop(self) -> None:
        async def close() -> None:
            for link in list(self.links):
                self._drop(link)
            if self._server is not None:
                self._server.close()
                await self._server.wait_closed()
        asyncio.run_coroutine_threadsafe(close(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def _drop(self, link: _Link) -> None:
        self.links.discard(link)
        for writer in (link.client, link.upstream):
            if writer is not None:
                _reset(writer)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        link = _Link(writer)
        if self.fault is Fault.RESET:
            _reset(writer)
            return
        self.links.add(link)
        try:
            up_reader, up_writer = await asyncio.open_connection(self.target_host, self.target_port)
        except OSError:
            self._drop(link)
            return
        link.upstream = up_writer
        pipes = {asyncio.ensure_future(self._pipe(reader, up_writer, delayed=False)),
                 asyncio.ensure_future(self._pipe(up_reader, writer, delayed=True))}
        try:
            # Either side closing (the upstream died, the caller left) closes the other, as a TCP
            # connection through a real network would end: a caller never waits on a dead half.
            await asyncio.wait(pipes, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for pipe in pipes:
                pipe.cancel()
            self.links.discard(link)
            for w in (writer, up_writer):
                w.close()

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delayed: bool) -> None:
        """Copies one direction; chunks coming back from the upstream wait out the latency, in order."""
        queue: asyncio.Queue[tuple[float, bytes] | None] = asyncio.Queue()

        async def send() -> None:
            while (item := await queue.get()) is not None:
                due, data = item
                if (wait := due - time.monotonic()) > 0:
                    await asyncio.sleep(wait)
                writer.write(data)
                await writer.drain()

        sender = asyncio.create_task(send())
        try:
            while data := await reader.read(CHUNK):
                if self.fault is Fault.BLACKHOLE:
                    continue  # read and dropped: the other side hears nothing
                due = time.monotonic() + (self.latency_s if delayed and self.fault is Fault.LATENCY else 0.0)
                queue.put_nowait((due, data))
        except (ConnectionError, OSError):
            pass
        finally:
            queue.put_nowait(None)
            try:
                await sender
            except (ConnectionError, OSError):
                pass
