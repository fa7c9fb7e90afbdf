"""Link expansion (`graph`): the pure parts of the gateway's stage (seeds, chunk rewrite, the plan, the
fusion weight), then the stage through the real stack with a small linked Markdown corpus."""

from __future__ import annotations

import grpc
import pytest

from hybridsearch.config.collections import CollectionConfig
from hybridsearch.config.settings import Settings
from hybridsearch.corpus import read_documents
from hybridsearch.fusion.methods import FusionMethod, FusionParams, Item, Ranking, fuse
from hybridsearch.gateway.query.graph import GraphLeg, keep_chunks, neighbours, seeds
from hybridsearch.gateway.query.report import LegStatus, Report
from hybridsearch.gateway.query.request import plan_search
from hybridsearch.v1 import common_pb2, fusion_pb2, ingest_pb2, search_pb2, vector_pb2, vector_pb2_grpc

OK, SKIPPED, FAILED = search_pb2.LEG_STATE_OK, search_pb2.LEG_STATE_SKIPPED, search_pb2.LEG_STATE_FAILED
GRAPH = common_pb2.LEG_GRAPH
FAST, BM25 = common_pb2.EFFORT_FAST, common_pb2.RETRIEVAL_MODE_BM25


def fused_hit(doc_id, chunk=0):
    return fusion_pb2.FusedHit(doc_id=doc_id, chunk_id=f"{doc_id}#{chunk}")


def test_the_seeds_are_the_top_fused_documents():
    fused = [fused_hit(d) for d in "abcdefg"]
    assert seeds(fused, 5) == ("a", "b", "c", "d", "e")
    assert seeds(fused[:2], 5) == ("a", "b") and seeds([], 5) == ()


def test_a_neighbour_already_fused_keeps_its_chunk():
    graph_list = common_pb2.RankedList(leg=GRAPH, hits=[
        common_pb2.LegHit(doc_id="b", chunk_id="b#4", rank=1), common_pb2.LegHit(doc_id="new", chunk_id="new#1", rank=2)])
    assert keep_chunks(graph_list, [fused_hit("a"), fused_hit("b", 2)]) == 1
    assert [h.chunk_id for h in graph_list.hits] == ["b#2", "new#1"]


def test_the_graph_hit_lifts_the_chunk_fusion_chose():
    """After the rewrite the second fusion sees one chunk of the document, so the graph's evidence adds
    to it instead of choosing another chunk of the same document."""
    lists = [Ranking(common_pb2.LEG_BM25, [Item("a", "a#0", 5.0), Item("b", "b#2", 3.0)]),
             Ranking(GRAPH, [Item("b", "b#2", 0.9)])]
    fused = {f.doc_id: f for f in fuse(lists, FusionParams())}
    assert fused["b"].chunk_id == "b#2"
    assert {e.leg for e in fused["b"].evidence} == {common_pb2.LEG_BM25, GRAPH}


def test_graph_weight_weighs_the_graph_list_under_every_method():
    params = FusionParams(leg_weights={"graph": 0.25}, rrf_leg_weights={"graph": 0.25})
    assert params.leg_weight(GRAPH) == 0.25
    params.method = FusionMethod.ZSCORE
    assert params.leg_weight(GRAPH) == 0.25


def test_the_plan_takes_the_request_then_the_collection():
    s = Settings(collections={"linked": CollectionConfig(graph=True)})
    plan = lambda collection, **kw: plan_search(search_pb2.SearchRequest(query="q", collection=collection, **kw), s)  # noqa: E731
    assert not plan("other").graph and plan("other", graph=True).graph
    assert plan("linked").graph and not plan("linked", graph=False).graph


def test_the_leg_request_carries_seeds_query_filters_and_bound():
    s = Settings()
    only = [common_pb2.MetadataFilter(field="lang", equals="en")]
    base = common_pb2.LegSearchRequest(collection="c", limit=100, filters=only, metadata_fields=["type"], queries=[
        common_pb2.LegQuery(text="q", kind=common_pb2.QUERY_KIND_ORIGINAL)])
    leg = GraphLeg(("a", "b"), s.graph)
    request = leg.request(base, None, None)
    assert isinstance(request, vector_pb2.NeighboursRequest)
    assert (list(request.seeds), request.query.text, request.limit) == (["a", "b"], "q", s.graph.neighbours)
    assert list(request.filters) == only and list(request.metadata_fields) == ["type"]
    assert (leg.leg, leg.part) == (GRAPH, "graph")


class Plan:
    def __init__(self, graph: bool) -> None:
        self.graph, self.query = graph, "q"


class Runner:
    """Stands in for gateway.query.legs.runner.LegRunner: records the leg it was asked to run, answers `answer`."""

    def __init__(self, answer) -> None:
        self.answer, self.calls = answer, []

    async def run(self, leg, plan, queries, deadline, report):
        self.calls.append(leg)
        return self.answer(report)


async def stage(graph: bool, answer):
    report, runner = Report(), Runner(answer)
    fused = [fused_hit("a"), fused_hit("b", 2)]
    out = await neighbours(Plan(graph), fused, Settings().graph, runner, None, report)
    return out, report, runner.calls


async def test_the_stage_is_skipped_when_off():
    out, report, calls = await stage(False, lambda report: None)
    assert out is None and calls == [] and report.legs["graph"].reason == "off"
    assert report.legs["graph"].state == SKIPPED and not report.degraded


async def test_a_failed_graph_call_adds_no_list_and_degrades():
    def failed(report):
        report.legs["graph"] = LegStatus(name="graph", state=FAILED, reason="deadline exceeded")

    out, report, calls = await stage(True, failed)
    assert out is None and len(calls) == 1 and report.degraded
    assert calls[0].seeds == ("a", "b") and calls[0].part == "graph"


async def test_neighbours_come_back_with_chunks_kept():
    def answer(report):
        report.legs["graph"] = LegStatus(name="graph", state=OK, reason="qdrant-edge links")
        return [common_pb2.RankedList(leg=GRAPH, hits=[
            common_pb2.LegHit(doc_id="b", chunk_id="b#0", rank=1), common_pb2.LegHit(doc_id="c", chunk_id="c#0", rank=2)])]

    out, report, _ = await stage(True, answer)
    assert [h.chunk_id for h in out.hits] == ["b#2", "c#0"]
    assert report.legs["graph"].reason == "2 neighbours of 2 seeds (1 new, 1 already candidates); qdrant-edge links"


# The stack: a linked corpus. ops/keys.md is what the query finds; it links to the runbook (Markdown,
# relative), to [[Vault]] (wiki) and is linked to by the postmortem (links metadata field). None of the
# three says "rotate", "signing" or "keys": BM25 cannot find them, only the links lead there.
FILES = {
    "ops/keys.md": "# Rotating signing keys\n\nRotate the signing keys every 90 days. The exact steps are in "
                   "[the runbook](../runbooks/procedure.md#steps). Where they live: [[Vault]].\n",
    "runbooks/procedure.md": "# Procedure R-17\n\nStop the issuer, export the new pair with kms export, restart "
                             "the issuer and verify the JWKS endpoint answers.\n",
    "vault.md": "# Vault\n\nThe secret store holds certificates and their private halves.\n",
    "baking/bread.md": "# Sourdough\n\nFeed the starter flour and water every day and keep it warm.\n",
    "house.md": "# Spare house keys\n\nLeave the spare keys with a neighbour when you travel.\n",
    "lease.md": "# Before signing a lease\n\nRead every clause before signing; ask about the deposit.\n",
    "coffee.md": "# Espresso\n\nGrind finer when the shot runs fast; coarser when it chokes the machine.\n",
}
POSTMORTEM = ingest_pb2.Document(id="notes/postmortem", title="The March outage",
                                 text="For two hours the issuer served an expired pair; nobody had noticed.",
                                 metadata={"links": "ops/keys.md", "folder": "notes"})
QUERY = "rotate the signing keys"


@pytest.fixture(scope="module")
def linked(gateway, tmp_path_factory):
    folder = tmp_path_factory.mktemp("linked")
    for name, text in FILES.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    documents, _ = read_documents(folder)
    documents = [*documents, POSTMORTEM]
    gateway.index("notes", documents)
    gateway.index("linked", documents)


def ask(gateway, collection="notes", **fields):
    return gateway.search(search_pb2.SearchRequest(query=QUERY, collection=collection, effort=FAST, explain=True,
                                                   **fields))


def graph_list(response):
    lists = [rl for rl in response.explain.leg_lists if rl.leg == GRAPH]
    assert len(lists) <= 1
    return lists[0] if lists else None


def states(response):
    return {leg.name: leg for leg in response.legs}


@pytest.mark.stack
def test_a_document_only_a_link_reaches_appears_with_graph(gateway, linked):
    without = ask(gateway, mode=BM25)
    assert without.hits[0].doc_id == "ops/keys.md"
    assert "runbooks/procedure.md" not in {h.doc_id for h in without.hits}
    assert states(without)["graph"].state == SKIPPED and graph_list(without) is None

    with_graph = ask(gateway, mode=BM25, graph=True)
    state = states(with_graph)["graph"]
    assert state.state == OK and not with_graph.degraded, state.reason
    found = {h.doc_id: h for h in with_graph.hits}
    assert with_graph.hits[0].doc_id == "ops/keys.md"
    # Out (Markdown link), out (wiki link), in (links metadata field): all three neighbours join.
    assert {"runbooks/procedure.md", "vault.md", "notes/postmortem"} <= set(found)
    assert {l.leg for l in found["runbooks/procedure.md"].legs} == {GRAPH}
    assert found["runbooks/procedure.md"].title == "Procedure R-17"  # the graph hit carries its text
    neighbours = {h.doc_id: h.score for h in graph_list(with_graph).hits}
    assert set(neighbours) == {"runbooks/procedure.md", "vault.md", "notes/postmortem"}  # seeds excluded
    # Each neighbour scores its best chunk's similarity (the vector leg's for the same query) times its
    # edge: explicit links either way 1.0, the wiki link 0.7 (GraphSettings).
    vector = next(rl for rl in ask(gateway, mode=common_pb2.RETRIEVAL_MODE_VECTOR).explain.leg_lists
                  if rl.leg == common_pb2.LEG_VECTOR and rl.kind == common_pb2.QUERY_KIND_ORIGINAL)
    similarity = {h.doc_id: h.score for h in vector.hits}
    weights = {d: score / similarity[d] for d, score in neighbours.items()}
    assert weights == pytest.approx({"runbooks/procedure.md": 1.0, "notes/postmortem": 1.0, "vault.md": 0.7}, rel=1e-3)
    stages = {t.stage for t in with_graph.explain.timings}
    assert {"graph", "leg.graph"} <= stages
    assert with_graph.explain.fusion.HasField("graph_weight")


@pytest.mark.stack
def test_filters_still_apply_to_neighbours(gateway, linked):
    not_runbooks = [common_pb2.MetadataFilter(field="folder", not_equals="runbooks")]
    response = ask(gateway, mode=BM25, graph=True, filters=not_runbooks)
    assert states(response)["graph"].state == OK
    assert "runbooks/procedure.md" not in {h.doc_id for h in graph_list(response).hits}
    assert "runbooks/procedure.md" not in {h.doc_id for h in response.hits}
    assert "notes/postmortem" in {h.doc_id for h in response.hits}


@pytest.mark.stack
def test_hybrid_neighbours_keep_the_chunk_already_fused(gateway, linked):
    response = ask(gateway, graph=True)
    assert states(response)["graph"].state == OK
    chunks = {h.doc_id: h.chunk_id for h in response.hits}
    for hit in graph_list(response).hits:
        if hit.doc_id in chunks:
            assert hit.chunk_id == chunks[hit.doc_id]
    # Every document of this small corpus is a vector candidate already: the graph adds evidence, not hits.
    n = len(graph_list(response).hits)
    assert n and f"(0 new, {n} already candidates)" in states(response)["graph"].reason


@pytest.mark.stack
def test_a_collection_can_expand_by_default_and_a_request_turn_it_off(gateway, linked):
    assert states(ask(gateway, "linked", mode=BM25))["graph"].state == OK
    off = ask(gateway, "linked", mode=BM25, graph=False)
    assert states(off)["graph"].state == SKIPPED and states(off)["graph"].reason == "off"
    plain = ask(gateway, mode=BM25)
    assert [(h.doc_id, h.score) for h in off.hits] == [(h.doc_id, h.score) for h in plain.hits]


@pytest.mark.stack
def test_neighbours_refuses_bad_requests(stack):
    with grpc.insecure_channel(stack.settings.endpoints.addr("vector")) as ch:
        stub = vector_pb2_grpc.VectorServiceStub(ch)
        query = common_pb2.LegQuery(text="q", kind=common_pb2.QUERY_KIND_ORIGINAL)
        for request, message in [
            (vector_pb2.NeighboursRequest(collection="notes", query=query, limit=5), "seeds"),
            (vector_pb2.NeighboursRequest(collection="notes", seeds=["a"], limit=5), "query.text"),
            (vector_pb2.NeighboursRequest(collection="notes", seeds=["a"], query=query), "limit"),
        ]:
            with pytest.raises(grpc.RpcError) as err:
                stub.Neighbours(request, timeout=10)
            assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and message in err.value.details()
