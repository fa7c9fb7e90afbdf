"""Fusion and expansion inside the gateway through a real stack (topology.in_gateway [fusion, expansion]), so the
launcher starts neither process and nothing listens on their ports; FAST and BALANCED answer whole, not
degraded, with the fusion configuration explained as the service would apply it and BALANCED's feedback variants
made in the gateway (its BM25 probe over the gateway's channel, its cache in Redis: the second ask is a hit); the
doctor says where both run: one machine's default, set here as well.
(Every other test stack runs the chart's topology, every service a process of its own: tests/stacks.py.)"""

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
INSIDE = ["fusion", "expansion"]


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    env = {**stack_env_on("2605", "2657", "2880"), "HYBRIDSEARCH_DATA_DIR": str(tmp_path_factory.mktemp("topology")),
           "HYBRIDSEARCH_TOPOLOGY__IN_GATEWAY": json.dumps(INSIDE)}
    with running_stack(env) as running:
        yield running


def test_fusion_and_expansion_inside_the_gateway_have_no_process_and_answer_whole(stack):
    assert stack.settings.topology.in_gateway == INSIDE
    assert "gateway" in stack.parts
    for name in INSIDE:
        assert name not in stack.parts
        assert any(note.startswith(f"{name}: inside the gateway") for note in stack.notes)
        host, port = stack.settings.endpoints.addr(name).rsplit(":", 1)
        with socket.socket() as s:
            assert s.connect_ex((host, int(port))) != 0  # nothing serves it
    with gateway_client(stack) as client:
        client.upsert("topo", [document(f"d{i}", f"Harbour journal entry {i}: lighthouse keepers log the tide "
                                                 f"and the {['gulls', 'fog', 'ships'][i % 3]} at dawn.") for i in range(12)])
        for effort in (common_pb2.EFFORT_FAST, common_pb2.EFFORT_BALANCED):
            answer = client.search(search_pb2.SearchRequest(query="lighthouse fog at dawn", collection="topo",
                                                            effort=effort, explain=True))
            assert answer.hits and not answer.degraded and not answer.notices, answer.notices
            assert len(answer.explain.leg_lists) >= 2  # the legs' lists, fused here
            assert answer.explain.fusion == params_to_proto(params_from_settings(stack.settings.fusion))
        balanced = [client.search(search_pb2.SearchRequest(query="harbour lighthouse keepers", collection="topo",
                                                           effort=common_pb2.EFFORT_BALANCED, explain=True))
                    for _ in range(2)]
        for answer in balanced:
            expansion = next(leg for leg in answer.legs if leg.name == "expansion")
            assert expansion.state == search_pb2.LEG_STATE_OK, expansion
            assert answer.explain.expansion_generator == "prf" and answer.explain.lexical_variants
        assert not balanced[0].explain.expansion_cache_hit and balanced[1].explain.expansion_cache_hit
        assert balanced[1].explain.lexical_variants == balanced[0].explain.lexical_variants
    doctor = subprocess.run([sys.executable, "-m", "hybridsearch.cli", "doctor"], capture_output=True, text=True,
                            timeout=120, env=stack.test_env)
    assert doctor.stdout.count("IN GATEWAY") == 2 and "expansion" in doctor.stdout, doctor.stdout
