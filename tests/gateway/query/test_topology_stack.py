"""Fusion inside the gateway through a real stack (topology.in_gateway [fusion]), so the
launcher starts no fusion process and nothing listens on its port; FAST and BALANCED answer whole, not
degraded, with the fusion configuration explained as the service would apply it; the doctor says where
fusion runs: one machine's default, set here as well. (Every other test stack runs the chart's topology, a fusion
service of its own: tests/stacks.py.)"""

from __future__ import annotations

import json
import socket
import subprocess
import sys

import pytest
from stacks import gateway_client, running_stack, stack_env_on

from hybridsearch.client import document
from hybridsearch.fusion.params import params_from_settings, params_to_proto
from hybridsearch.v1 import common_pb2, search_pb2

pytestmark = [pytest.mark.stack, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    env = {**stack_env_on("2605", "2657", "2880"), "HYBRIDSEARCH_DATA_DIR": str(tmp_path_factory.mktemp("topology")),
           "HYBRIDSEARCH_TOPOLOGY__IN_GATEWAY": json.dumps(["fusion"])}
    with running_stack(env) as running:
        yield running


def test_fusion_inside_the_gateway_has_no_process_and_answers_whole(stack):
    assert stack.settings.topology.in_gateway == ["fusion"]
    assert "fusion" not in stack.parts and "gateway" in stack.parts
    assert any(note.startswith("fusion: inside the gateway") for note in stack.notes)
    host, port = stack.settings.endpoints.addr("fusion").rsplit(":", 1)
    with socket.socket() as s:
        assert s.connect_ex((host, int(port))) != 0  # nothing serves fusion
    with gateway_client(stack) as client:
        client.upsert("topo", [document(f"d{i}", f"Harbour journal entry {i}: lighthouse keepers log the tide "
                                                 f"and the {['gulls', 'fog', 'ships'][i % 3]} at dawn.") for i in range(12)])
        for effort in (common_pb2.EFFORT_FAST, common_pb2.EFFORT_BALANCED):
            answer = client.search(search_pb2.SearchRequest(query="lighthouse fog at dawn", collection="topo",
                                                            effort=effort, explain=True))
            assert answer.hits and not answer.degraded and not answer.notices, answer.notices
            assert len(answer.explain.leg_lists) >= 2  # the legs' lists, fused here
            assert answer.explain.fusion == params_to_proto(params_from_settings(stack.settings.fusion))
    doctor = subprocess.run([sys.executable, "-m", "hybridsearch.cli", "doctor"], capture_output=True, text=True,
                            timeout=120, env=stack.test_env)
    assert "IN GATEWAY" in doctor.stdout and "fusion" in doctor.stdout, doctor.stdout
