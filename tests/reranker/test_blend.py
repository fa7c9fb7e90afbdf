import pytest

from hybridsearch.reranker.blend import blend, fusion_weight, keyword_floor


@pytest.mark.parametrize("position,weight", [(1, 0.75), (3, 0.75), (4, 0.60), (10, 0.60), (11, 0.40), (50, 0.40)])
def test_position_bands(position, weight):
    assert fusion_weight(position) == weight


def test_blend_reorders_by_weighted_scores():
    fusion = [1.0, 0.9, 0.8, 0.7]
    rerank = [0.0, 0.1, 0.2, 1.0]
    out = blend("q", fusion, rerank, ["", "", "", ""])
    finals = {b.index: b.final for b in out}
    assert finals[0] == pytest.approx(0.75)
    assert finals[3] == pytest.approx(0.6 * 0.7 + 0.4 * 1.0)
    assert [b.index for b in out] == [3, 0, 1, 2]


def test_keyword_floor_scales_with_matched_terms():
    assert keyword_floor("harper smith", "a note about Harper") == pytest.approx(0.15)
    assert keyword_floor("harper smith", "Harper Smith wrote") == pytest.approx(0.30)
    assert keyword_floor("show", "how it works") == 0.0  # word boundaries, no substring match


def test_floor_rescues_literal_matches_and_score_floor_drops_noise():
    out = blend("harper", [0.5, 0.5, 0.5, 0.5], [0.01, 0.01, 0.5, 0.5], ["Harper", "nothing", "x", "y"], score_floor=0.03)
    kept = {b.index: b for b in out}
    assert kept[0].rerank == pytest.approx(0.30)
    assert 1 not in kept
