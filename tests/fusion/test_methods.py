import pytest

from hybridsearch.query import legs
from hybridsearch.fusion.methods import FusionMethod, FusionParams, Item, QueryKind, Ranking, fuse
from hybridsearch.v1 import common_pb2

BM25, VECTOR = common_pb2.LEG_BM25, common_pb2.LEG_VECTOR
RAG = {"bm25": 0.4, "vector": 0.6}  # the RAG service's min-max weights (the worked examples')


def ranking(leg, ids, kind=QueryKind.ORIGINAL, scores=None):
    scores = scores or [float(len(ids) - i) for i in range(len(ids))]
    return Ranking(leg=leg, kind=kind, items=[Item(d, f"{d}#0", s) for d, s in zip(ids, scores)])


def test_rrf_worked_example_from_the_issue():
    # vector [A,B,C,D] + BM25 [C,E,A,F], k=60, 1-based ranks: A and C tie at 1/61 + 1/63 (+ bonus).
    fused = fuse([ranking(VECTOR, "ABCD"), ranking(BM25, "CEAF")], FusionParams(top_rank_bonus=0.0))
    scores = {f.doc_id: f.score for f in fused}
    assert scores["A"] == pytest.approx(1 / 61 + 1 / 63)
    assert scores["C"] == pytest.approx(1 / 61 + 1 / 63)
    assert scores["B"] == pytest.approx(1 / 62) and scores["E"] == pytest.approx(1 / 62)
    assert scores["D"] == pytest.approx(1 / 64) and scores["F"] == pytest.approx(1 / 64)
    assert {f.doc_id for f in fused[:2]} == {"A", "C"}
    assert {f.doc_id for f in fused[2:4]} == {"B", "E"}
    assert {f.doc_id for f in fused[4:]} == {"D", "F"}


def test_top_rank_bonus_only_for_top5_of_both_original_lists():
    vector = ranking(VECTOR, "ABCDEFG")
    bm25 = ranking(BM25, "GFEDCBA")
    fused = {f.doc_id: f.score for f in fuse([vector, bm25])}
    plain = {f.doc_id: f.score for f in fuse([vector, bm25], FusionParams(top_rank_bonus=0.0))}
    for doc in "CDE":  # in the top 5 of both
        assert fused[doc] == pytest.approx(plain[doc] + 0.1)
    for doc in "ABFG":
        assert fused[doc] == pytest.approx(plain[doc])


def test_variant_and_hyde_weights():
    lists = [
        ranking(BM25, ["X"], QueryKind.LEXICAL_VARIANT),
        ranking(VECTOR, ["Y"], QueryKind.HYDE),
        ranking(VECTOR, ["Z"], QueryKind.ORIGINAL),
    ]
    scores = {f.doc_id: f.score for f in fuse(lists)}
    assert scores["X"] == pytest.approx(0.5 / 61)
    assert scores["Y"] == pytest.approx(0.7 / 61)
    assert scores["Z"] == pytest.approx(1.0 / 61)


def test_best_chunk_per_document_votes_once_and_keeps_best_chunk():
    bm25 = Ranking(BM25, [Item("A", "A#3", 9.0), Item("A", "A#1", 8.0), Item("B", "B#0", 7.0)])
    fused = fuse([bm25], FusionParams(top_rank_bonus=0.0))
    assert [f.doc_id for f in fused] == ["A", "B"]
    assert fused[0].chunk_id == "A#3"
    assert fused[1].score == pytest.approx(1 / 62)  # B is the second document, not the third hit


def test_linear_minmax_leg_weights():
    bm25 = ranking(BM25, "AB", scores=[10.0, 0.0])
    vector = ranking(VECTOR, "BA", scores=[0.9, 0.1])
    fused = {f.doc_id: f.score for f in fuse([bm25, vector], FusionParams(method=FusionMethod.LINEAR, leg_weights=RAG))}
    assert fused["A"] == pytest.approx(0.4)
    assert fused["B"] == pytest.approx(0.6)


@pytest.mark.parametrize("method", list(FusionMethod))
def test_every_method_handles_empty_inputs(method):
    params = FusionParams(method=method)
    assert fuse([], params) == []
    assert fuse([Ranking(BM25, []), Ranking(VECTOR, [])], params) == []


@pytest.mark.parametrize("method", list(FusionMethod))
def test_every_method_normalises_to_unit_interval_and_orders(method):
    fused = fuse([ranking(BM25, "ABCDE"), ranking(VECTOR, "EDCBA", scores=[0.9, 0.8, 0.5, 0.4, 0.1])],
                 FusionParams(method=method))
    assert fused[0].normalized == pytest.approx(1.0)
    assert all(0.0 <= f.normalized <= 1.0 for f in fused)
    assert [f.score for f in fused] == sorted((f.score for f in fused), reverse=True)
    assert len(fused) == 5


@pytest.mark.parametrize("method", list(FusionMethod))
def test_single_list_keeps_its_order(method):
    fused = fuse([ranking(BM25, "QWERTY")], FusionParams(method=method))
    assert [f.doc_id for f in fused] == list("QWERTY")


def test_dbsf_clips_outliers():
    scores = [100.0] + [1.0] * 20
    fused = fuse([ranking(BM25, [f"d{i}" for i in range(21)], scores=scores)],
                 FusionParams(method=FusionMethod.DBSF, leg_weights=RAG))
    assert fused[0].doc_id == "d0"
    assert fused[0].score == pytest.approx(0.4)  # clipped at 1.0 x bm25 weight 0.4


def test_zscore_worked_example():
    # bm25 scores 3, 2, 1 -> z = 1.2247, 0, -1.2247 -> shifted 2.449, 1.2247, 0; vector 0.5 / 0.5 -> all 1.0
    bm25 = ranking(BM25, "ABC", scores=[3.0, 2.0, 1.0])
    vector = ranking(VECTOR, "CB", scores=[0.5, 0.5])
    fused = {f.doc_id: f.score for f in fuse([bm25, vector], FusionParams(method=FusionMethod.ZSCORE, leg_weights=RAG))}
    assert fused["A"] == pytest.approx(0.4 * 2.449490, rel=1e-5)
    assert fused["B"] == pytest.approx(0.4 * 1.224745 + 0.6 * 1.0, rel=1e-5)
    assert fused["C"] == pytest.approx(0.6 * 1.0)


def test_rrf_leg_weights_scale_each_leg():
    params = FusionParams(top_rank_bonus=0.0, rrf_leg_weights={"bm25": 1.0, "vector": 2.0})
    fused = {f.doc_id: f.score for f in fuse([ranking(BM25, "A"), ranking(VECTOR, "B"),
                                               ranking(VECTOR, "C", QueryKind.SEMANTIC_VARIANT)], params)}
    assert fused["A"] == pytest.approx(1 / 61)
    assert fused["B"] == pytest.approx(2 / 61)
    assert fused["C"] == pytest.approx(2 * 0.5 / 61)  # leg weight times the variant weight


# --- legs by the leg table (query.legs) --------------------------------------------------------------------

UNKNOWN = 99  # a Leg value the enum does not name (proto3 enums are open) and no row of the leg table has


@pytest.mark.parametrize("method", list(FusionMethod))
def test_a_leg_without_a_row_fuses_with_the_default_weight(method):
    params = FusionParams(method=method, top_rank_bonus=0.0)
    default = legs.DEFAULT_RRF_WEIGHT if method is FusionMethod.RRF else legs.DEFAULT_WEIGHT
    assert params.leg_weight(UNKNOWN) == default and legs.name_of(UNKNOWN) == "leg_99"
    fused = {f.doc_id: f for f in fuse([ranking(UNKNOWN, "A"), ranking(BM25, "B")], params)}
    assert fused["A"].evidence[0].leg == UNKNOWN
    expected = default / 61 if method is FusionMethod.RRF else default * 1.0  # one hit: normalised to 1
    assert fused["A"].score == pytest.approx(expected)
    # Named by its `leg_<n>` key, it weighs what the config says.
    params.weights()["leg_99"] = 3.0
    assert fuse([ranking(UNKNOWN, "A")], params)[0].score == pytest.approx(3 / 61 if method is FusionMethod.RRF else 3.0)


FAKE = legs.LegSpec("fake", UNKNOWN, weight=0.3, rrf_weight=2.0, bonus=True)


def test_a_new_row_is_a_new_leg_for_fusion_without_another_edit(monkeypatch):
    """A fourth leg is one row: its default weights, its name as the weight key, its share of the bonus."""
    monkeypatch.setattr(legs, "SPECS", (*legs.SPECS, FAKE))
    params = FusionParams()
    assert params.rrf_leg_weights["fake"] == 2.0 and params.leg_weights["fake"] == 0.3
    assert params.leg_weight(UNKNOWN) == 2.0 and legs.name_of(UNKNOWN) == "fake"
    lists = [ranking(BM25, "AB"), ranking(VECTOR, "AC"), ranking(UNKNOWN, "DA")]
    scores = {f.doc_id: f.score for f in fuse(lists, params)}
    # A is in the head of all three bonus legs' original lists: it earns the bonus; without FAKE's list it would not.
    assert scores["A"] == pytest.approx(1 / 61 + 1 / 61 + 2 / 62 + 0.1)
    without = {f.doc_id: f.score for f in fuse(lists[:2], params)}
    assert without["A"] == pytest.approx(2 / 61)


def test_the_bonus_legs_are_the_rows_that_earn_it():
    assert legs.bonus_values() == {BM25, VECTOR}
