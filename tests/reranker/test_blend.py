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


def test_bands_from_settings():
    from hybridsearch.config.settings import Settings

    cfg = Settings(rerank={"bands": [(5, 0.9)], "tail_fusion_weight": 0.7}).rerank
    bands = tuple(cfg.bands)
    assert [fusion_weight(p, bands, cfg.tail_fusion_weight) for p in (1, 5, 6)] == [0.9, 0.9, 0.7]
    # Fusion-only bands keep the fused order whatever the reranker says.
    out = blend("q", [1.0, 0.9, 0.8], [0.0, 0.5, 1.0], ["", "", ""], bands=((100, 1.0),))
    assert [b.index for b in out] == [0, 1, 2]


@pytest.mark.parametrize("bands", [[(10, 0.6), (3, 0.75)], [(0, 0.5)], [(3, 1.5)]])
def test_bad_bands_are_refused(bands):
    from pydantic import ValidationError

    from hybridsearch.config.settings import Settings

    with pytest.raises(ValidationError, match="ascending ranks"):
        Settings(rerank={"bands": bands})
