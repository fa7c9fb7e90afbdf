"""A test stack refuses to start on a taken port, naming it (tests/stacks.py): before, it talked to whatever
answered there (another checkout's stack: "invalid API key", 13 failed and 17 errors in one module)."""

from __future__ import annotations

import socket

import pytest

from stacks import running_stack, shifted, taken_ports


def test_a_taken_port_is_named_and_the_stack_refused():
    env = {"HYBRIDSEARCH_ENDPOINTS__GATEWAY_PORT": "29871", "HYBRIDSEARCH_REDIS__STATE_URL": "redis://127.0.0.1:29872/0",
           "HYBRIDSEARCH_ENDPOINTS__VECTOR_PORT": "29873"}
    moved = shifted(env)  # as running_stack moves them (HYBRIDSEARCH_TEST_PORT_SHIFT)
    port = moved["HYBRIDSEARCH_ENDPOINTS__VECTOR_PORT"]
    assert taken_ports(moved) == []
    with socket.socket() as held:
        held.bind(("127.0.0.1", int(port)))
        held.listen()
        assert taken_ports(moved) == [f"{port} (HYBRIDSEARCH_ENDPOINTS__VECTOR_PORT)"]
        with pytest.raises(pytest.fail.Exception, match=f"{port} .*HYBRIDSEARCH_TEST_PORT_SHIFT"):
            with running_stack(env):
                pass
